"""The first call's compile in the cost model (``playground.core.settings.compile_cost``), by hand.

Each expected price is written out here from the module's measured constants (seconds per
endpoint and dense layer, the recipe's factor, each endpoint's rate). The rule checked: a
compile is a one-off per program, so it never refuses a request (only the warm work caps and
the memory bound do, counted here by hand as in test_cost.py); a /step whose compile reaches
FIRST_CALL_SECONDS counts it as work, for its lane. Whether the constants cover the real
compile is measured, not tested: bench/bench_compile.py prints each configuration's first-call
overhead beside the model's.
"""

from __future__ import annotations

import itertools

import pytest
from cost_by_hand import compile_work_by_hand, seconds_by_hand

from playground.core.model.models import MODELS
from playground.core.recipes.registry import COMPUTE_DTYPES, recipe
from playground.core.runs.sweep import check_sweep_work, sweep_exponents
from playground.core.settings import compile_cost as cc
from playground.core.settings.settings import StepConfig, defaults, settings

MIB = 1024 * 1024


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


def test_a_long_compile_is_work_for_the_lane_and_a_short_one_is_not():
    small = {"n": 4, "d_in": 8, "d_out": 4, "model": "mlp", "hidden_width": 8}
    long_ones = 0
    for dtype, layers in itertools.product(COMPUTE_DTYPES, range(1, 9)):
        config = StepConfig(**small, hidden_layers=layers, compute_dtype=dtype)
        if seconds_by_hand("step", dtype, layers + 1) >= cc.FIRST_CALL_SECONDS:
            long_ones += 1
            expected = compile_work_by_hand("step", config)
        else:
            expected = 0.0
        assert cc.first_call_work(config, "step") == pytest.approx(expected)
    assert long_ones  # the deep block-scaled MLPs: accepted above, and priced here


def test_no_model_is_refused_for_its_compile_alone():
    # 8 hidden layers of a layer-normed classifier compile for far longer than a first call's
    # seconds in every recipe, on every endpoint; their warm work is tiny: all accepted
    deep = {"n": 4, "d_in": 8, "d_out": 4, "model": "mlp", "hidden_width": 8, "hidden_layers": 8}
    for dtype in COMPUTE_DTYPES:
        config = StepConfig(**deep, norm="layernorm", task="classification", compute_dtype=dtype)
        assert seconds_by_hand("dynamics", dtype, 9, norm=True, softmax=True) > 3
        assert config.replace(steps=1000).check_run().steps == 1000
        check_sweep_work(config, sweep_exponents(dtype).size)


def _step_work_by_hand(config: StepConfig, widths: list[int]) -> float:
    """Two sgd passes (matmuls x the recipe's factor, 8 per parameter entry and state: sgd has
    none) and the report's 3072 per parameter entry."""
    entries = sum(a * b + b for a, b in itertools.pairwise(widths))
    matmuls = config.n * sum(a * b for a, b in itertools.pairwise(widths))
    return 2 * (matmuls * recipe(config.compute_dtype).work_factor + entries * 8) + entries * 3072


def test_every_endpoint_model_and_recipe_is_accepted_at_the_defaults():
    """The 36 combinations a visitor can pick without touching a number (every endpoint x
    model x recipe at the page's defaults): all accepted, within the warm caps counted here."""
    page = defaults()
    for name in defaults():
        assert settings()[name].check(name, page[name]) == page[name]  # within its range
    shape = [page["d_in"]] + [page["hidden_width"]] * page["hidden_layers"] + [page["d_out"]]
    for model, dtype in itertools.product(MODELS, COMPUTE_DTYPES):
        config = StepConfig(model=model, compute_dtype=dtype)  # /step: validation prices it
        widths = shape if model == "mlp" else [page["d_in"], page["d_out"]]
        assert _step_work_by_hand(config, widths) <= 2**35
        # /dynamics: the default steps fit the run's cap
        assert config.check_run().steps == page["steps"] <= config.max_steps
        entries = sum(a * b + b for a, b in itertools.pairwise(widths))
        matmuls = page["n"] * sum(a * b for a, b in itertools.pairwise(widths))
        run_step = matmuls * recipe(dtype).work_factor + entries * 480 + 2**23
        assert page["steps"] * run_step <= 2**35
        # /sweep over every scale of the recipe
        check_sweep_work(config, sweep_exponents(dtype).size)
