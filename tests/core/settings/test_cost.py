"""The cost model (``playground.core.settings.cost``) against counts written out here by hand.

Each expected number is counted from the layers' shapes in the test itself (kernel a x b plus
bias b per dense layer; N multiply-adds per kernel entry and pass; two passes a step), never
by calling the function under test. A refusal must name the field and what fits, and what it
says fits must be accepted.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import pytest
from cost_by_hand import run_steps_by_hand

from playground.core.model.models import ModelChoice
from playground.core.model.optimizers import OPTIMIZERS, build_optimizer
from playground.core.recipes.registry import COMPUTE_DTYPES, recipe
from playground.core.settings import cost
from playground.core.settings.settings import ConfigError, StepConfig

LARGEST_LINEAR = {"n": 4096, "d_in": 1024, "d_out": 1024}
WIDE_MLP = {"model": "mlp", "hidden_width": 1024}


def test_every_optimizer_and_recipe_is_priced():
    # the state the cost model prices is the parameter-shaped arrays optax really keeps
    for name, spec in OPTIMIZERS.items():
        state = build_optimizer(name, 0.1).init(jnp.zeros((3, 5)))
        shaped = [leaf for leaf in jax.tree.leaves(state) if jnp.shape(leaf) == (3, 5)]
        assert spec.state_arrays == len(shaped), name
    # float8's per-tensor scaling costs a quarter more than a plain cast
    factors = {dtype: recipe(dtype).work_factor for dtype in COMPUTE_DTYPES}
    per_tensor = {name: factor for name, factor in factors.items() if recipe(name).block is None}
    assert per_tensor == {"bfloat16": 1.0, "float16": 1.0, "float8": 1.25}
    # a block recipe quantizes each operand block by block, forward and backward: dearer than
    # one scale per tensor, within the 2.5x of the matmul bound bench/bench_blocks.py measures
    blocks = [factor for name, factor in factors.items() if recipe(name).block is not None]
    assert len(blocks) == 3 and all(1.25 < factor <= 2.5 for factor in blocks)


def test_parameter_entries_count_every_kernel_and_bias():
    # linear 5 -> 3: kernel 15 + bias 3
    assert cost.parameter_entries(ModelChoice("linear"), 5, 3) == 18
    # mlp 5 -> 4 -> 4 -> 3: (20 + 4) + (16 + 4) + (12 + 3)
    assert cost.parameter_entries(ModelChoice("mlp", 2, 4), 5, 3) == 59


def test_the_largest_linear_step_by_hand():
    config = StepConfig(**LARGEST_LINEAR)
    matmul = 4096 * 1024 * 1024
    entries = 1024 * 1024 + 1024
    # two passes, and the report's 3072 per parameter entry
    report = entries * 3072
    assert cost.step_work(config) == 2 * (matmul + entries * 8) + report
    adam = config.replace(optimizer="adam")
    assert cost.step_work(adam) == 2 * (matmul + entries * 8 * 3) + report
    float8 = config.replace(compute_dtype="float8")
    assert cost.step_work(float8) == 2 * (matmul * 1.25 + entries * 8) + report


def test_memory_by_hand():
    config = StepConfig(n=100, d_in=10, d_out=5, model="mlp", hidden_layers=2, hidden_width=20)
    entries = (10 * 20 + 20) + (20 * 20 + 20) + (20 * 5 + 5)
    activations = 100 * (10 + 20 + 20 + 5)
    expected = 192 * 2**20 + entries * 112 + activations * 8
    assert cost.memory_bytes(config) == expected
    assert cost.memory_bytes(config.replace(optimizer="adam")) == expected + entries * 2 * 8


def test_the_largest_linear_step_is_accepted_with_its_training_steps():
    config = StepConfig(**LARGEST_LINEAR)
    entries = 1024 * 1024 + 1024
    # a training step: the matmuls, 480 per parameter entry, 2^23 for the step itself
    step = 4096 * 1024 * 1024 + entries * 480 + 2**23
    assert config.max_steps == run_steps_by_hand(step) >= 1
    float8 = StepConfig(**LARGEST_LINEAR, compute_dtype="float8")
    step = 4096 * 1024 * 1024 * 1.25 + entries * 480 + 2**23
    assert float8.max_steps == run_steps_by_hand(step)


def test_a_wide_model_at_a_small_batch_pays_for_its_parameter_updates():
    # 85 steps of this model took 12 s (6.3 M entries); its entries now bound the run.
    config = StepConfig(n=64, d_in=1024, d_out=1024, model="mlp", hidden_layers=2)
    config = config.replace(hidden_width=1024, optimizer="adam")
    entries = 3 * (1024 * 1024 + 1024)
    step = 64 * (1024 * 1024 * 3) + entries * 480 + 2**23
    assert config.max_steps == run_steps_by_hand(step)
    assert config.max_steps < 85


def test_a_step_over_the_work_cap_names_n_and_what_fits():
    settings = LARGEST_LINEAR | WIDE_MLP | {"hidden_layers": 2, "optimizer": "adam"}
    with pytest.raises(ConfigError) as refused:
        StepConfig(**settings)
    assert refused.value.field == "n"
    message = str(refused.value)
    assert "2^35" in message and "got 4096" in message
    fits = int(re.search(r"at most (\d+)", message).group(1))
    # 2 passes x N x (1024 x 1024 x 3) multiply-adds, plus adam's 3 x 8 per parameter entry,
    # and the report's 3072, within 2^35 (the compile caps nothing: test_compile_cost.py)
    entries = 3 * (1024 * 1024 + 1024)

    def fits_both(n: int) -> bool:
        return 2 * (n * 1024 * 1024 * 3 + entries * 24) + entries * 3072 <= 2**35

    assert fits_both(fits) and not fits_both(fits + 1)
    StepConfig(**settings | {"n": fits})


def test_a_model_over_the_memory_cap_names_its_layers_and_what_fits():
    settings = LARGEST_LINEAR | WIDE_MLP | {"hidden_layers": 8, "n": 1024}
    with pytest.raises(ConfigError) as refused:
        StepConfig(**settings)
    assert refused.value.field == "hidden_layers"
    message = str(refused.value)
    assert "1,024 MB" in message
    fits = int(re.search(r"at most (\d+) hidden layers", message).group(1))

    # what it says fits is the most the memory cap takes: 192 MB + 112 B per parameter entry
    # + 8 B per activation
    def memory(layers: int) -> int:
        entries = (layers + 1) * (1024 * 1024 + 1024)
        return 192 * 2**20 + entries * 112 + 1024 * 1024 * (layers + 2) * 8

    assert memory(fits) <= 2**30 < memory(fits + 1)
    with pytest.raises(ConfigError):
        StepConfig(**settings | {"hidden_layers": fits + 1})


def test_every_accepted_request_is_within_both_caps():
    """Over the corners of every model, optimizer and recipe: an accepted config's step is
    within 2^35 of work and 1 GB, and its training run within 2^35 (the run's cap)."""
    for dtype in COMPUTE_DTYPES:
        for optimizer in OPTIMIZERS:
            for layers in (1, 4, 8):
                for n in (1, 1024, 4096):
                    settings = LARGEST_LINEAR | WIDE_MLP | {"hidden_layers": layers, "n": n}
                    try:
                        config = StepConfig(**settings, compute_dtype=dtype, optimizer=optimizer)
                    except ConfigError:
                        continue
                    assert cost.step_work(config) <= 2**35
                    assert cost.memory_bytes(config) <= 2**30
                    factor = 1.25 if dtype == "float8" else 1.0
                    entries = cost.parameter_entries(config.model_choice, 1024, 1024)
                    step = config.model_work * factor + entries * 480 + 2**23
                    assert config.max_steps * step <= 2**35


def test_downloads_are_refused_before_any_compute_past_the_csv_rows():
    cost.check_downloads(StepConfig(**LARGEST_LINEAR))  # 1024 x 1024 + 1024 rows: the cap
    two_layers = StepConfig(**LARGEST_LINEAR | WIDE_MLP | {"hidden_layers": 1})
    with pytest.raises(ConfigError, match="one row per parameter entry") as refused:
        cost.check_downloads(two_layers)
    assert f"{2 * (1024 * 1024 + 1024):,} entries" in str(refused.value)


def test_a_sweep_counts_its_scales_and_every_parameter_entry():
    config = StepConfig(n=150, d_in=1024, d_out=1024)
    entries = 1024 * 1024 + 1024
    # 127 bfloat16 scales x (N x 1024 x 1024 multiply-adds + 192 per parameter entry)
    assert cost.sweep_work(config, 127) == 127 * (150 * 1024 * 1024 + entries * 192)
    cost.check_sweep(config, 127)
    with pytest.raises(ConfigError) as refused:
        cost.check_sweep(config.replace(n=4096), 127)
    fits = int(re.search(r"at most (\d+)", str(refused.value)).group(1))

    # within 2^36 (the compile caps nothing: test_compile_cost.py)
    def fits_both(n: int) -> bool:
        return 127 * (n * 1024 * 1024 + entries * 192) <= 2**36

    assert fits_both(fits) and not fits_both(fits + 1)


def test_a_sweep_whose_gradients_overflow_memory_names_the_layers():
    # 3 hidden layers of 1024: 4 x (1024 x 1024 + 1024) entries, 240 bytes each, > 1 GB (in
    # float16, whose step compiles fast enough for this many layers)
    config = StepConfig(n=16, d_in=1024, d_out=1024, model="mlp", hidden_layers=3)
    config = config.replace(hidden_width=1024, compute_dtype="float16")
    assert 192 * 2**20 + 4 * (1024 * 1024 + 1024) * 240 > 2**30
    with pytest.raises(ConfigError) as refused:
        cost.check_sweep(config, 127)
    assert refused.value.field == "hidden_layers"
    fits = int(re.search(r"at most (\d+) hidden layers", str(refused.value)).group(1))
    assert cost.sweep_memory_bytes(config.replace(hidden_layers=fits)) <= 2**30
