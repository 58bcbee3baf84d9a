"""Each step tab's note states numbers recomputed here from the report's arrays (numpy), and an
empty chart says why it is empty."""

from __future__ import annotations

import re

import numpy as np
import pytest
from stated_figures import significant_digits, states

from playground import StepConfig, run_report
from playground.sections.step import tab as step_tab
from playground.sections.step.charts import gradient_scatter, update_size_histogram
from playground.sections.step.notes import (
    NOTES,
    comparison_note,
    histogram_note,
    loss_note,
    note_id,
    update_note,
)

SMALL = {"n": 32, "d_in": 8, "d_out": 4}


@pytest.fixture(scope="module")
def plain():
    return run_report(StepConfig(**SMALL))


@pytest.fixture(scope="module")
def flushing():
    # float16 with data near 2^-12 and no loss scale: gradient entries flush to zero.
    return run_report(
        StepConfig(
            **SMALL,
            compute_dtype="float16",
            input_scale=2.0**-12,
            target_scale=2.0**-12,
            loss_scale=1.0,
        )
    )


@pytest.fixture(scope="module")
def overflowing():
    # float16 with a scale past its largest value: every scaled gradient is inf or NaN.
    return run_report(StepConfig(**SMALL, compute_dtype="float16", loss_scale=2.0**40))


def test_every_step_tab_has_a_note_with_its_own_element_id():
    assert set(step_tab.TABS) <= set(NOTES)
    assert len({note_id(tab) for tab in NOTES}) == len(NOTES)


def test_the_loss_note_gives_each_paths_change_in_percent(plain):
    note = loss_note(plain)
    mixed = (plain.mixed_new_loss - plain.mixed_initial_loss) / plain.mixed_initial_loss
    float32 = (plain.float32_new_loss - plain.float32_initial_loss) / plain.float32_initial_loss
    assert f"{mixed:+.2%}" in note and f"{float32:+.2%}" in note
    gap = np.float64(plain.mixed_new_loss) - np.float64(plain.float32_new_loss)
    assert f"{gap:.3g}" in note


def test_the_histogram_note_counts_the_entries_flushed_to_zero(flushing):
    kernel = flushing.params["kernel"]
    flushed = int(np.sum((kernel.mixed_grads == 0) & (kernel.float32_grads != 0)))
    assert flushed > 0
    assert f"{flushed:,} of {kernel.mixed_grads.size:,} kernel gradient entries are 0" in (
        histogram_note(flushing)
    )


def test_the_comparison_note_counts_exactly_equal_entries_and_the_median_error(plain):
    kernel = plain.params["kernel"]
    equal = int(np.sum(kernel.mixed_grads == kernel.float32_grads))
    defined = kernel.float32_grads != 0
    median = np.median(
        np.abs(kernel.mixed_grads[defined] - kernel.float32_grads[defined])
        / np.abs(kernel.float32_grads[defined])
    )
    note = comparison_note(plain)
    assert f"{equal:,} of {kernel.mixed_grads.size:,}" in note
    assert f"{median:.4g}" in note


def test_the_update_note_gives_the_median_update_against_its_tensors_rms(plain):
    kernel = plain.params["kernel"]
    before = kernel.before.astype(np.float64)
    ratio = np.abs(kernel.updates.astype(np.float64)) / np.sqrt(np.mean(before**2))
    note = update_note(plain)
    assert f"{np.median(ratio):.3g}" in note
    assert f"{int(np.sum(kernel.updates == 0)):,} of {kernel.updates.size:,}" in note


def test_a_nan_state_says_why_each_chart_is_empty(overflowing):
    kernel = overflowing.params["kernel"]
    assert not np.isfinite(kernel.mixed_grads).any()
    comparison = comparison_note(overflowing)
    assert comparison.startswith("No finite points") and "loss scale" in comparison
    assert "inf or NaN" in histogram_note(overflowing)
    assert "NaN" in loss_note(overflowing) or "inf" in loss_note(overflowing)
    scatter = gradient_scatter(overflowing)
    assert scatter["data"] == []
    (note,) = scatter["layout"]["annotations"]
    assert note["text"].startswith("no finite points: ")
    size = sum(p.size for p in overflowing.params.values())
    assert f"of {size:,} mixed gradient entries" in note["text"]
    # Sensible axes: symmetric, spanning the float32 gradients' largest magnitude.
    reach = max(float(np.abs(p.float32_grads).max()) for p in overflowing.params.values())
    assert scatter["layout"]["xaxis"]["range"] == pytest.approx([-reach, reach])
    updates = update_size_histogram(overflowing)
    if not any(trace["y"] and sum(trace["y"]) for trace in updates["data"]):
        assert updates["layout"]["annotations"][0]["text"].startswith("nothing to draw")


def test_a_loss_past_ten_times_its_start_is_a_factor_not_a_percentage_of_16_digits():
    grown = run_report(StepConfig(**SMALL, lr=50.0))
    factor = np.float64(grown.float32_new_loss) / np.float64(grown.float32_initial_loss)
    assert factor >= 10
    said = re.search(r"float32 from [\d.e+-]+ to [\d.e+-]+ \(([\d.e+]+) x\)", loss_note(grown))
    assert said and significant_digits(said.group(1)) <= 4
    assert states(said.group(1), factor, 1e-6) and "%);" not in loss_note(grown)


def test_no_share_of_a_float32_change_within_its_rounding():
    # The tiny-data lesson's step: float32's loss barely moves, by fewer than 10^4 of its float32
    # spacings, so a share of that change would state its rounding (it differed from one XLA
    # CPU variation to another in the third digit).
    from playground.core.lessons import lesson

    flushing = lesson("float16-flush").run()
    moved = np.float64(flushing.float32_new_loss) - np.float64(flushing.float32_initial_loss)
    spacing = np.spacing(np.float32(flushing.float32_initial_loss))
    assert 0 < abs(moved) < 10_000 * spacing
    note = loss_note(flushing)
    assert "of float32's own change" not in note and "too close to its rounding" in note
    # The plain step's float32 change spans far more: its share is given.
    assert "of float32's own change" in loss_note(run_report(StepConfig(**SMALL)))


def test_the_worst_relative_error_is_stated_to_two_digits(plain):
    kernel = plain.params["kernel"]
    defined = kernel.float32_grads != 0
    worst = np.max(
        np.abs(kernel.mixed_grads[defined] - kernel.float32_grads[defined])
        / np.abs(kernel.float32_grads[defined])
    )
    said = re.search(r"the worst by ([\d.e+-]+)\.$", comparison_note(plain))
    # Measured 0.1% apart across XLA's CPU variations; the 2 digits hold within 1%.
    assert said and significant_digits(said.group(1)) <= 2 and states(said.group(1), worst, 1e-2)
