"""The training tab's endpoint (``dynamics``) called directly, without a server."""

from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go
import pytest

from helpers import plotly_sent
from playground import StepConfig
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import defaults
from playground.ui.arguments import DYNAMICS, STEP
from playground.ui.tabs.dynamics import run_dynamics_event

INPUT_ORDER = STEP.before_data
DYNAMICS_FIELDS = DYNAMICS.before_data

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
OVERFLOWING_FLOAT16 = {**SMALL, "compute_dtype": "float16", "loss_scale": 2.0**16}


def _run_values(overrides: dict, steps: int, mode: str, period: int) -> list:
    """The dynamics handler's positional inputs (the table's order) for these settings."""
    config = defaults() | overrides | {"steps": steps, "mode": mode, "period": period}
    return [config[name] for name in DYNAMICS_FIELDS]


def _figure(plot) -> go.Figure:
    return go.Figure(plotly_sent(plot))  # raises ValueError on any invalid property


# --- dynamics --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "steps", "mode", "period"),
    [
        (SMALL, 20, "static", 100),
        (OVERFLOWING_FLOAT16, 30, "dynamic", 5),
    ],
    ids=["bfloat16-static", "float16-dynamic"],
)
def test_dynamics_final_losses_match_run_dynamics(overrides, steps, mode, period):
    views = run_dynamics_event(*_run_values(overrides, steps, mode, period))
    reading, summary = views.dynamics_reading, views.dynamics_json
    plots = [views.loss_curves, views.lost_updates, views.scale_curve]
    dynamics = run_dynamics(StepConfig(**(defaults() | overrides)), steps, mode, period)
    for run in ("float32", "mixed", "pure"):
        expected = float(getattr(dynamics, f"{run}_loss")[-1])
        assert summary["final_loss"][run] == expected, run
    assert (summary["steps"], summary["mode"], summary["period"]) == (steps, mode, period)
    assert reading.startswith(f"- Over {steps} steps the loss went ")
    assert len(plots) == 3
    titles = [_figure(plot).layout.title.text for plot in plots]
    assert titles[0] == "Loss over the steps"
    assert titles[1].startswith("Lost-update meter")
    assert titles[2] == f"Loss scale over the steps ({mode} scaling, mixed run)"


def test_dynamic_scaling_skips_every_sixth_step_at_float16_overflow():
    # S = 2^16 overflows float16 at once: skip, halve to 2^15, five good steps, grow to 2^16,
    # overflow again... so the skips fall on the updates of index 0, 6, 12, 18 and 24, which
    # the charts' x axis (and the reading) count as steps 1, 7, 13, 19 and 25.
    reading, summary, *_ = run_dynamics_event(*_run_values(OVERFLOWING_FLOAT16, 30, "dynamic", 5))
    assert summary["mixed_skipped_steps"] == [0, 6, 12, 18, 24]
    assert summary["mixed_applied_updates"] == 25
    assert "skipped 5 of 30 updates (steps 1, 7, 13, 19, 25)" in reading


@pytest.mark.parametrize(
    ("steps", "mode", "period", "field"),
    [
        (0, "static", 100, "steps"),
        (1001, "static", 100, "steps"),
        (10, "adaptive", 100, "mode"),
        (10, "dynamic", 0, "period"),
    ],
    ids=["steps=0", "steps=1001", "mode=adaptive", "period=0"],
)
def test_dynamics_refuses_bad_arguments_naming_the_field(steps, mode, period, field):
    with pytest.raises(gr.Error) as caught:
        run_dynamics_event(*_run_values(SMALL, steps, mode, period))
    message = caught.value.message
    assert message.startswith(f"{field} ("), message
    assert message.endswith(f"got {dict(steps=steps, mode=mode, period=period)[field]!r}")


def test_old_positional_dynamics_calls_keep_their_meaning():
    """Inputs added later (the model and optimizer) come last: a call with the first ten
    settings and then steps, mode, period means what it meant before they existed."""
    old = [(defaults() | SMALL)[name] for name in DYNAMICS_FIELDS[:10]]
    _, summary, *_ = run_dynamics_event(*old, 12, "dynamic", 3)
    assert (summary["steps"], summary["mode"], summary["period"]) == (12, "dynamic", 3)
    assert summary["config"]["model"] == "linear" and summary["config"]["optimizer"] == "sgd"
    named = run_dynamics_event(*old, steps=12, mode="dynamic", period=3)[1]
    assert named == summary


# --- the tab ---------------------------------------------------------------------------------


def test_training_charts_wait_hidden_until_a_run_draws_them():
    from playground.sections.dynamics.tab import PLOT_LABELS
    from playground.ui.tabs.dynamics import build, show_charts

    with gr.Blocks():
        tab = build()
    charts = tab.dynamics_charts
    assert charts.visible is False
    for name in PLOT_LABELS:
        assert getattr(tab, name).parent is charts
    shown = show_charts()
    assert isinstance(shown, gr.Column) and shown.visible is True


def test_the_dynamics_endpoint_still_returns_the_figures_themselves():
    # Showing the charts is a separate private event: the API's outputs are plain figures.
    values = {"n": 32, "d_in": 8, "d_out": 4, "steps": 12, "mode": "static", "period": 100}
    views = run_dynamics_event(**values)
    for plot in (views.loss_curves, views.lost_updates, views.scale_curve):
        assert plotly_sent(plot)["data"]
