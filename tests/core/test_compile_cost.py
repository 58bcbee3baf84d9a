"""The first call's compile in the cost model (``playground.core.compile_cost``), by hand.

Each expected price is written out here from the module's measured constants (seconds per
endpoint and dense layer, the recipe's factor, each endpoint's rate) and the work counted by
hand as in test_cost.py; a refusal must name the field and what fits, and what it says fits
must be accepted. Whether the constants cover the real compile is measured, not tested:
bench/bench_compile.py prints each configuration's first-call overhead beside the model's.
"""

from __future__ import annotations

import re

import pytest
from cost_by_hand import budget_by_hand, compile_work_by_hand, run_steps_by_hand, seconds_by_hand

from playground.core import compile_cost as cc
from playground.core.policy import COMPUTE_DTYPES, recipe
from playground.core.settings import ConfigError, StepConfig
from playground.core.sweep import check_sweep_work, sweep_exponents

WIDE = {"d_in": 1024, "d_out": 1024, "model": "mlp", "hidden_width": 1024}
MIB = 1024 * 1024


def step_work_by_hand(n: int, hidden: int, dtype: str) -> float:
    """Two passes of an adam MLP of ``hidden`` layers of 1024 (test_cost.py's count)."""
    entries = (hidden + 1) * (MIB + 1024)
    passes = 2 * (n * MIB * (hidden + 1) * recipe(dtype).work_factor + entries * 8 * 3)
    return passes + entries * 3072  # and the report's per-entry work


def test_the_price_of_a_compile_by_hand():
    config = StepConfig(n=8, d_in=4, d_out=2, model="mlp", hidden_layers=2, norm="layernorm")
    config = config.replace(task="classification")
    # three dense layers, each with its norm's share, and the softmax's, at bfloat16's factor
    assert cc.compile_work(config, "step") == pytest.approx(compile_work_by_hand("step", config))
    assert cc.compile_seconds("step", "bfloat16", 3, norm=True, classification=True) == (
        pytest.approx(cc.COMPILE["step"].base + 3 * cc.COMPILE["step"].per_layer * 1.5 + 0.1)
    )
    # a recipe's factor multiplies each layer's part and its extra seconds add, per endpoint;
    # a scaled recipe's quantizers never compile less than a plain cast
    for dtype in COMPUTE_DTYPES:
        for endpoint in cc.ENDPOINTS:
            factor, extra = recipe(dtype).compile_on(endpoint)
            assert extra >= 0 and (factor >= 1.0 or recipe(dtype).plain_dtype)
            assert cc.compile_seconds(endpoint, dtype, 2) == pytest.approx(
                seconds_by_hand(endpoint, dtype, 2)
            )
    for endpoint in cc.ENDPOINTS:
        assert cc.first_call_budget(endpoint) == pytest.approx(budget_by_hand(endpoint))


def test_a_first_call_over_its_budget_names_n_and_what_fits():
    # mxfp8's quantizers compile in every matmul: its deep MLP's N is lowered for its compile
    settings = WIDE | {"hidden_layers": 1, "optimizer": "adam", "compute_dtype": "mxfp8"}
    with pytest.raises(ConfigError) as refused:
        StepConfig(**settings, n=3000)
    assert refused.value.field == "n"
    message = str(refused.value)
    assert "compiling its programs" in message and "got 3000" in message
    fits = int(re.search(r"at most (\d+)", message).group(1))
    config = StepConfig(**settings, n=fits)
    compiling, budget = compile_work_by_hand("step", config), budget_by_hand("step")
    assert step_work_by_hand(fits, 1, "mxfp8") + compiling <= budget
    assert step_work_by_hand(fits + 1, 1, "mxfp8") + compiling > budget
    # the warm cap alone would have taken more rows
    assert step_work_by_hand(fits + 1, 1, "mxfp8") <= 2**35


def test_a_model_whose_compile_alone_is_over_names_its_layers():
    settings = {"n": 4, "d_in": 8, "d_out": 4, "model": "mlp", "hidden_width": 8}
    deepest = {}
    for dtype in COMPUTE_DTYPES:
        fits = [
            layers
            for layers in range(1, 9)
            if seconds_by_hand("step", dtype, layers + 1) < cc.FIRST_CALL_SECONDS
        ]
        deepest[dtype] = max(fits)
        for layers in range(1, 9):
            config = settings | {"hidden_layers": layers, "compute_dtype": dtype}
            if layers <= deepest[dtype]:
                StepConfig(**config)
                continue
            with pytest.raises(ConfigError) as refused:
                StepConfig(**config)
            assert refused.value.field == "hidden_layers"
            said = re.search(r"at most (\d+) hidden layers?", str(refused.value))
            assert int(said.group(1)) == deepest[dtype]
    # the plain casts compile less than a block-scaled recipe's quantizers
    assert deepest["bfloat16"] >= deepest["mxfp8"] >= deepest["nvfp4"]


def test_the_default_models_fit_their_first_calls():
    # the page's default (linear) model is accepted on its first call everywhere; its default
    # MLP steps in every recipe but nvfp4 (one hidden layer there) and trains in the plain
    # casts (float8's and the block recipes' runs compile too long for an MLP: refused by
    # hidden_layers)
    for dtype in COMPUTE_DTYPES:
        config = StepConfig(compute_dtype=dtype)
        assert config.max_steps >= 1
        check_sweep_work(config, sweep_exponents(dtype).size)
        mlp = StepConfig(compute_dtype=dtype, model="mlp", hidden_layers=2 - (dtype == "nvfp4"))
        if recipe(dtype).plain_dtype:
            mlp.replace(steps=1).check_run()


def test_every_accepted_request_fits_its_first_call():
    """Over corners of every recipe, depth and batch: an accepted step's work plus its compile
    is within the step's first-call budget, and its longest training run with the run's."""
    for dtype in COMPUTE_DTYPES:
        for layers in (1, 2, 4):
            for n in (1, 512, 4096):
                try:
                    config = StepConfig(**WIDE, hidden_layers=layers, n=n, compute_dtype=dtype)
                except ConfigError:
                    continue
                step = 2 * (n * MIB * (layers + 1) * recipe(dtype).work_factor)
                step += (layers + 1) * (MIB + 1024) * (2 * 8 + 3072)
                assert step + compile_work_by_hand("step", config) <= budget_by_hand("step")
                if config.max_steps:
                    run = config.max_steps * (
                        n * MIB * (layers + 1) * recipe(dtype).work_factor
                        + (layers + 1) * (MIB + 1024) * 480
                        + 2**23
                    )
                    compiling = compile_work_by_hand("dynamics", config)
                    assert run + compiling <= budget_by_hand("dynamics")


def test_a_training_run_over_its_first_call_names_steps():
    config = StepConfig(n=4096, d_in=1024, d_out=1024, model="linear", compute_dtype="float8")
    step = 4096 * MIB * 1.25 + (MIB + 1024) * 480 + 2**23
    assert config.max_steps == run_steps_by_hand(config, step)
    with pytest.raises(ConfigError) as refused:
        config.replace(steps=config.max_steps + 1).check_run()
    assert refused.value.field == "steps"
    assert "compile" in str(refused.value)
