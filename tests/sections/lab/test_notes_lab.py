"""What the lab's charts say to notice, against counts recomputed here with numpy and ml_dtypes."""

from __future__ import annotations

import dataclasses

import ml_dtypes
import numpy as np
import pytest

from playground import run_report
from playground.core.runs.sweep import run_sweep
from playground.core.step.report import LOG2_HIGH, LOG2_LOW, ActivationReport
from playground.sections.lab.charts import activation_histogram, sweep_figure
from playground.sections.lab.notes import activation_note, magnitude_note, sweep_gap_notes
from playground.sections.lab.tab import magnitude_table
from scenarios import TINY_FLOAT16


def _grads(report, name: str) -> np.ndarray:
    return np.concatenate([getattr(p, name).ravel() for p in report.params.values()])


def _share(count: int, total: int) -> str:
    return f"{count / total:.1%} ({count:,})"


@pytest.fixture(scope="module")
def unscaled():
    return run_report(dataclasses.replace(TINY_FLOAT16, loss_scale=1.0))


def test_at_s_1_the_note_counts_the_tiny_gradients_float16_loses(unscaled):
    float32 = _grads(unscaled, "float32_grads").astype(np.float64)
    lost = int(np.sum((float32.astype(np.float16) == 0) & (float32 != 0)))
    assert lost > float32.size / 2  # the scenario's point: most of them
    note = magnitude_note(unscaled)
    assert note.startswith(f"{_share(lost, float32.size)} of the entries fall left of float16's")
    assert "a larger loss scale moves the bars right" in note
    assert f"**What to notice:** {note}" in magnitude_table(unscaled)


def test_at_s_2_15_the_note_says_how_many_scaling_brought_back(unscaled):
    scaled = run_report(dataclasses.replace(TINY_FLOAT16, loss_scale=2.0**15))
    float32 = _grads(scaled, "float32_grads")
    lost_now = int(np.sum((_grads(scaled, "scaled_grads") == 0) & (float32 != 0)))
    lost_unscaled = int(np.sum((float32.astype(np.float16) == 0) & (float32 != 0)))
    assert lost_now < lost_unscaled
    note = magnitude_note(scaled)
    assert f"Without scaling, {_share(lost_unscaled, float32.size)} of the entries" in note
    assert "S = 2^15" in note and f"{_share(lost_now, float32.size)} are." in note


def test_an_overflowing_scale_is_named_with_float16s_largest_value():
    report = run_report(dataclasses.replace(TINY_FLOAT16, loss_scale=2.0**16, input_scale=1.0))
    scaled = _grads(report, "scaled_grads")
    overflow = int(np.sum(~np.isfinite(scaled)))
    assert overflow > 0
    note = magnitude_note(report)
    largest = float(ml_dtypes.finfo(np.float16).max)
    assert note.startswith(f"At S = 2^16, {_share(overflow, scaled.size)} of the scaled")
    assert f"(largest {largest:g})" in note


def test_the_activation_chart_names_the_layer_with_most_zeros_and_the_non_finite_ones(unscaled):
    counts = np.zeros(LOG2_HIGH - LOG2_LOW, np.int64)
    counts[-5 - LOG2_LOW] = 8
    layers = (
        ActivationReport(layer=0, zero_count=2, nonfinite_count=0, size=10, log2_counts=counts),
        ActivationReport(layer=1, zero_count=1, nonfinite_count=1, size=10, log2_counts=counts),
    )
    report = dataclasses.replace(unscaled, activations=layers)
    assert activation_note(report).startswith("most exact zeros: layer 1, 20.0%")
    assert "1 entries inf or NaN from layer 2" in activation_note(report)
    title = activation_histogram(report)["layout"]["title"]["text"]
    assert title.endswith(f"<sup>{activation_note(report)}</sup>")


def test_the_sweep_says_where_its_curves_stop_and_why():
    sweep = run_sweep(TINY_FLOAT16)
    missing = sweep.exponents[~np.isfinite(sweep.new_loss)]
    assert missing.size and np.all(np.diff(missing) == 1) and missing[-1] == sweep.exponents[-1]
    texts = [note["text"] for note in sweep_gap_notes(sweep)]
    assert f"no point from 2^{missing[0]}: scaled gradients overflow float16" in texts
    figure_texts = [note["text"] for note in sweep_figure(sweep)["layout"]["annotations"]]
    assert set(texts) <= set(figure_texts)


def test_a_sweep_with_every_point_finite_has_no_gap_note():
    # bfloat16 has float32's range: tiny data stays finite at every scale up to 2^126.
    sweep = run_sweep(dataclasses.replace(TINY_FLOAT16, compute_dtype="bfloat16"))
    assert np.all(np.isfinite(sweep.new_loss)) and np.all(np.isfinite(sweep.rel_error))
    assert sweep_gap_notes(sweep) == []
