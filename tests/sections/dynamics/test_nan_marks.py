"""A loss curve that stops being finite ends with a marker naming the step and a cause its own
run shows: a float16 step at too large a loss scale, or a learning rate every run diverges at."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from playground import StepConfig
from playground.core.runs.train import run_dynamics
from playground.sections.dynamics.charts import dynamics_loss_figure
from playground.sections.dynamics.curves import curves_of
from playground.sections.dynamics.nan_marks import nan_marks, scale_text
from playground.sections.dynamics.tab import run_notes

SMALL = {"n": 32, "d_in": 8, "d_out": 4}


def _first_bad(curve: np.ndarray) -> int | None:
    """The first index whose value is not finite, by a plain loop."""
    for index, value in enumerate(curve.tolist()):
        if value != value or value in (float("inf"), float("-inf")):
            return index
    return None


@pytest.fixture(scope="module")
def overflowing():
    # float16's largest value is 65504: scaled by 2^16, the gradients of data of scale 1 leave it.
    return run_dynamics(StepConfig(**SMALL, compute_dtype="float16", loss_scale=2.0**16, steps=10))


@pytest.fixture(scope="module")
def diverging():
    # The same program as ``overflowing`` (shapes, dtype, run length): only lr and S differ.
    return run_dynamics(StepConfig(**SMALL, compute_dtype="float16", loss_scale=1.0, lr=5.0,
                                   steps=10))  # fmt: skip


def test_scales_are_written_as_powers_of_two():
    assert [scale_text(s) for s in (2.0**16, 1.0, 2.0**-3, 3.0)] == ["2^16", "2^0", "2^-3", "3"]


def test_a_float16_step_at_too_large_a_scale_is_named_with_its_scale(overflowing):
    step = _first_bad(overflowing.mixed_loss)
    assert step is not None and _first_bad(overflowing.float32_loss) is None
    marks = {mark.run: mark for mark in nan_marks(curves_of(overflowing))}
    mark = marks["mixed"]
    word = "NaN" if np.isnan(overflowing.mixed_loss[step]) else "inf"
    assert (mark.step, mark.word) == (step, word)
    assert mark.label == f"{word} at step {step}: float16 step not finite (S = 2^16)"
    assert f"{overflowing.float32_loss[step]:.4g}" in mark.sentence
    assert "float32" not in marks  # float32 stayed finite: no marker on it
    # The pure run stops at the same step, its loss there within 10% of the mixed run's: one
    # marker names both, a line each, so their texts do not print over each other.
    pure = marks["pure"]
    assert _first_bad(overflowing.pure_loss) == step
    assert abs(overflowing.pure_loss[step - 1] / overflowing.mixed_loss[step - 1] - 1) < 0.1
    figure = dynamics_loss_figure(overflowing)
    (marker,) = [t for t in figure["data"] if t["mode"] == "markers+text"]
    assert marker["name"] == f"mixed, pure: {word} at step {step}"
    assert marker["x"] == [step]
    assert marker["text"] == [f"mixed: {mark.label}<br>pure: {pure.label}"]
    assert marker["y"] == [pytest.approx(float(overflowing.mixed_loss[step - 1]))]
    assert mark.sentence in run_notes(curves_of(overflowing), ())


def test_a_learning_rate_every_run_diverges_at_is_named_as_such(diverging):
    float32 = diverging.float32_loss
    step = _first_bad(diverging.mixed_loss)
    assert step is not None and float32[step] > float32[0]  # float32 grows there too
    mark = {m.run: m for m in nan_marks(curves_of(diverging))}["mixed"]
    assert mark.short == "diverged (float32 too)"
    assert "learning rate (5)" in mark.cause
    assert f"{float32[0]:.4g} to {float32[step]:.4g}" in mark.cause


def test_a_curve_that_grew_alone_is_a_low_precision_divergence(overflowing):
    # The same run with a pure curve that grows for three steps before it becomes NaN, while
    # float32 falls: the cause is the low-precision run's own divergence.
    float32 = np.linspace(1.0, 0.5, overflowing.steps + 1)
    pure = np.array(float32)
    pure[1:4] = [2.0, 4.0, 8.0]
    pure[4:] = np.nan
    run = dataclasses.replace(
        curves_of(overflowing), float32_loss=float32, pure_loss=pure, mixed_loss=float32
    )
    (mark,) = nan_marks(run)
    assert (mark.run, mark.step, mark.short) == ("pure", 4, "diverged in float16")
    assert "grew from 1 to 8" in mark.cause


def test_a_finite_run_has_no_marker():
    run = run_dynamics(StepConfig(**SMALL, steps=5))
    assert nan_marks(curves_of(run)) == []
    assert all(t["mode"] == "lines" for t in dynamics_loss_figure(run)["data"])
