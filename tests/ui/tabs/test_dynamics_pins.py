"""The training tab's page-only events, called directly: after a run, pin, clear, stale check."""

from __future__ import annotations

import json

import gradio as gr
import pytest

from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import StepConfig, defaults
from playground.sections.dynamics.pins import MAX_PINS
from playground.ui.tabs.dynamics import (
    after_run,
    clear_run_pins,
    controls_settings,
    pin_run,
    run_dynamics_event,
    stale_status,
)

SMALL = defaults() | {"n": 32, "d_in": 8, "d_out": 4, "steps": 6, "data": None}


def _trained(**changes):
    """The controls' values and the run's JSON summary, after the endpoint trained them."""
    values = SMALL | changes
    views = run_dynamics_event(
        **{("seed" if k == "model_seed" else k): v for k, v in values.items()}
    )
    return values, views.dynamics_json


def _traces(plot) -> list[dict]:
    return json.loads(plot.plot)["data"]


def test_a_run_then_a_pin_then_a_change_draws_both_named_by_what_differs():
    first, summary = _trained(loss_scale=1.0, compute_dtype="float16")
    column, shown, notes, status, *figures = after_run(first, summary, ())
    assert column.visible is True and status["visible"] is False
    assert all(figure is gr.skip() or isinstance(figure, dict) for figure in figures)
    pins, notes = pin_run(shown, ())
    assert pins == (shown,) and "pin 1: same settings" in notes

    second, summary = _trained(loss_scale=1.0, compute_dtype="bfloat16")
    _, current, notes, _, loss, meter, scale = after_run(second, summary, pins)
    groups = {t["legendgrouptitle"]["text"] for t in _traces(loss)}
    assert groups == {"this run: compute dtype = bfloat16", "pinned: compute dtype = float16"}
    expected = run_dynamics(StepConfig(**{k: v for k, v in first.items() if k != "data"}))
    (pinned_mixed,) = [
        t for t in _traces(loss) if t.get("legendgroup") == "pin0" and t["name"].startswith("mixed")
    ]
    assert pinned_mixed["y"] == pytest.approx(expected.mixed_loss.tolist())
    assert "pin 1: compute dtype = float16" in notes

    cleared, notes, loss, *_ = clear_run_pins(current)
    assert cleared == () and all("legendgroup" not in t for t in _traces(loss))


def test_pins_are_bounded_and_pinning_needs_a_run():
    pins, notes = pin_run(None, ())
    assert pins == () and "Train" in notes
    runs = [after_run(*_trained(lr=lr), ())[1] for lr in (0.01, 0.02, 0.03, 0.04, 0.05)]
    pins: tuple = ()
    for run in runs:
        pins, _ = pin_run(run, pins)
    assert pins == tuple(runs[-MAX_PINS:])


def test_the_stale_banner_follows_the_controls():
    values, summary = _trained(compute_dtype="bfloat16")
    shown = after_run(values, summary, ())[1]
    assert stale_status(values, shown)["visible"] is False
    # The controls send their own types: a slider's 32.0 is the run's 32.
    assert controls_settings(values | {"n": 32.0}) == shown.settings
    changed = stale_status(values | {"compute_dtype": "float16"}, shown)
    assert changed["visible"] is True
    assert "computed with compute dtype = bfloat16" in changed["value"]
    assert "now say compute dtype = float16" in changed["value"]
    refused = stale_status(values | {"lr": "abc"}, shown)["value"]
    assert "now say learning rate = abc" in refused  # a value the field refuses is named as typed
    assert stale_status(values, None)["visible"] is False  # nothing trained yet


def test_a_control_changed_during_the_run_leaves_the_run_shown_and_marked_stale():
    values, summary = _trained(lr=0.05)
    moved = values | {"lr": 0.2}  # what the controls say when the run ends
    _, shown, _, status, *_ = after_run(moved, summary, ())
    assert shown is not None and shown.settings["lr"] == "0.05"
    assert status["visible"] is True and "computed with learning rate = 0.05" in status["value"]
    assert "now say learning rate = 0.2" in status["value"]
