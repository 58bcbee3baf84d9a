"""Every recipe on one step (core.compare.comparison), its price (core.settings.cost) and its
view (sections.compare): each number against a computation written here, in float64 numpy.

The shape is the suite's 32 x 8 -> 4, whose programs every recipe has compiled elsewhere.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import plotly.graph_objects as go
import pytest

from playground.core.bounds import ConfigError
from playground.core.compare.comparison import ERROR_HIGH, ERROR_LOW, run_comparison
from playground.core.recipes.registry import RECIPES
from playground.core.settings import compile_cost, cost
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.compare.charts import comparison_figure
from playground.sections.compare.summary import reading, summarize

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
# float16 at S = 2^16: the scale itself is inf in float16, so its gradients are NaN.
OVERFLOW = SMALL | {"loss_scale": 2.0**16}


@pytest.fixture(scope="module")
def compared() -> dict[str, tuple]:
    """(comparison, every recipe's own step report) at two settings."""
    found = {}
    for name, settings in (("small", SMALL), ("overflow", OVERFLOW)):
        config = StepConfig(**settings)
        reports = {r: run_report(config.replace(compute_dtype=r)) for r in RECIPES}
        found[name] = run_comparison(config), reports
    return found


@pytest.mark.parametrize("case", ["small", "overflow"])
def test_each_row_is_its_recipes_own_step(compared, case):
    comparison, reports = compared[case]
    assert [row.recipe for row in comparison.rows] == list(RECIPES)
    twin = {row.float32_new for row in comparison.rows}
    assert len(twin) == 1  # one float32 twin for every row
    for row in comparison.rows:
        report = reports[row.recipe]
        # bit for bit, NaN included
        assert np.float64(row.mixed_new).tobytes() == np.float64(report.mixed_new_loss).tobytes()
        assert row.float32_new == report.float32_new_loss


@pytest.mark.parametrize("case", ["small", "overflow"])
def test_each_rows_errors_and_shares_by_hand(compared, case):
    comparison, reports = compared[case]
    for row in comparison.rows:
        params = reports[row.recipe].params.values()
        mixed = np.concatenate([p.mixed_grads.ravel() for p in params]).astype(np.float64)
        base = np.concatenate([p.float32_grads.ravel() for p in params]).astype(np.float64)
        with np.errstate(all="ignore"):
            expected = np.sqrt(np.sum((mixed - base) ** 2)) / np.sqrt(np.sum(base**2))
        if np.isfinite(expected):
            assert row.grad_rel_error == pytest.approx(expected, rel=1e-12)
        else:
            assert not math.isfinite(row.grad_rel_error)
        assert row.flushed_share == np.mean((mixed == 0) & (base != 0))
        assert row.nonfinite_share == np.mean(~np.isfinite(mixed))
        loss = reports[row.recipe]
        difference = loss.mixed_new_loss - loss.float32_new_loss
        assert np.float64(row.loss_error).tobytes() == np.float64(difference).tobytes()
        if math.isfinite(difference):
            assert row.loss_rel_error == pytest.approx(abs(difference) / abs(loss.float32_new_loss))
        gradients = [t for t in loss.float8 if t.role == "gradient"]
        saturated = sum(t.saturated for t in gradients)
        assert row.saturated_share == (
            saturated / sum(t.size for t in gradients) if saturated else 0
        )
        # the histogram: every entry once, each finite nonzero error in its binade
        assert row.error_counts.sum() == mixed.size
        with np.errstate(all="ignore"):
            relative = np.abs(mixed - base) / np.abs(base)
        binned = np.isfinite(mixed) & (base != 0) & (relative > 0)
        for exponent in (ERROR_LOW + 1, -8, -3, ERROR_HIGH - 1):
            inside = binned & (relative >= 2.0**exponent) & (relative < 2.0 ** (exponent + 1))
            assert row.error_counts[exponent - ERROR_LOW] == inside.sum(), exponent


def test_the_overflow_is_named_where_it_first_happens(compared):
    comparison, reports = compared["overflow"]
    rows = {row.recipe: row for row in comparison.rows}
    float16 = rows["float16"]
    # docs/lessons.md: 1,040 NaN of 1,040 at the default shape
    assert float16.nonfinite_share == 1.0
    assert float16.first_nonfinite == reports["float16"].first_nonfinite
    assert float16.first_nonfinite["backward"] is not None
    sentences = reading(comparison)
    line = next(s for s in sentences if s.startswith("float16"))
    assert "100.00% of its gradient entries are not finite" in line
    assert float16.first_nonfinite["backward"] in line


def test_the_closest_recipe_and_the_sentences(compared):
    comparison, _ = compared["small"]
    errors = {row.recipe: row.grad_rel_error for row in comparison.rows}
    best = min(errors, key=errors.get)
    assert comparison.closest.recipe == best
    sentences = reading(comparison)
    assert sentences[0].startswith(f"Here {best} is closest to float32")
    assert f"{errors[best]:.3g}" in sentences[0]
    # every other recipe once, nearest first, with its ratio to the closest
    others = sorted((r for r in errors if r != best), key=errors.get)
    assert [s.split(" ")[0] for s in sentences[1 : len(errors)]] == others
    for name, sentence in zip(others, sentences[1:], strict=False):
        assert f"{errors[name] / errors[best]:.3g} times as far" in sentence
        # what the recipe rounds, and to how many significant bits (ml_dtypes' mantissa + 1)
        chosen = RECIPES[name]
        bits = ml_dtypes.finfo(np.dtype(chosen.forward_format)).nmant + 1
        said = f"{chosen.forward_format} ({bits} significant bits"
        if "so the difference is rounding" in sentence:
            assert ("it quantizes only its matmul operands" in sentence) == chosen.quantizes
            assert said in sentence.split(", while ")[0], sentence
    summary = summarize(comparison)
    assert summary["closest"] == best
    assert [row["recipe"] for row in summary["recipes"]] == list(RECIPES)
    assert [entry["recipe"] for entry in summary["memory"]] == list(RECIPES)


def test_the_small_multiples_share_their_axes(compared):
    comparison, _ = compared["small"]
    figure = comparison_figure(comparison)
    go.Figure(figure)  # a valid Plotly figure
    assert [trace["name"] for trace in figure["data"]] == list(RECIPES)
    layout = figure["layout"]
    xs = [layout[key]["range"] for key in layout if key.startswith("xaxis")]
    ys = [layout[key]["range"] for key in layout if key.startswith("yaxis")]
    assert len(xs) == len(ys) == len(RECIPES)
    assert all(x == xs[0] for x in xs) and all(y == ys[0] for y in ys)
    for trace, row in zip(figure["data"], comparison.rows, strict=True):
        assert sum(trace["y"]) * row.entries == pytest.approx(row.error_counts[:-3].sum())


def test_compare_is_priced_as_the_sum_of_its_steps():
    config = StepConfig(n=4096, d_in=1024, d_out=1024)
    steps = [cost.step_work(config.replace(compute_dtype=name)) for name in RECIPES]
    assert cost.compare_work(config) == pytest.approx(sum(steps))
    with pytest.raises(ConfigError) as refused:
        cost.check_compare(config)
    assert refused.value.field == "n"
    fits = int(str(refused.value).split("at most ")[1].split(" ")[0])
    within = [cost.step_work(config.replace(n=fits, compute_dtype=name)) for name in RECIPES]
    beyond = [cost.step_work(config.replace(n=fits + 1, compute_dtype=name)) for name in RECIPES]
    assert sum(within) <= 2 * 2**35 < sum(beyond)
    cost.check_compare(config.replace(n=fits))  # what it says fits, fits


def test_a_first_comparison_is_priced_as_every_recipes_step_compile():
    from cost_by_hand import compile_work_by_hand

    config = StepConfig(model="mlp", hidden_layers=4)
    seconds = [compile_work_by_hand("step", config.replace(compute_dtype=r)) for r in RECIPES]
    assert compile_cost.compare_first_call_work(config) == pytest.approx(sum(seconds))
    # a single small recipe's step compiles under the first call's seconds; all six do not
    small = StepConfig(**SMALL)
    assert compile_cost.first_call_work(small, "step") == 0
    assert compile_cost.compare_first_call_work(small) > 0


def test_a_comparison_over_a_cap_is_refused_before_any_step():
    with pytest.raises(ConfigError, match=r"^n \(batch rows N\) must be at most \d+ to compare"):
        run_comparison(StepConfig(n=4096, d_in=1024, d_out=1024))
