"""The training-dynamics section: three runs over many steps, their curves and their reading.

Rule: ``dynamics_views(dynamics)`` turns a finished training run into the ``dynamics``
endpoint's named outputs, as plain values (Markdown, JSON, a Plotly dict per chart, CSV and JSON
files); the page (``ui.tabs.dynamics``) runs the training and lays out the components under the
same names. The page's own additions, outside the API: ``pinned_figures`` (the charts with the
pinned runs overlaid, ``sections.dynamics.pins``) and ``run_notes`` (where a curve stopped being
finite and why, and the pins by name).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from playground.core.runs.train import DynamicsReport
from playground.sections.dynamics.charts import (
    dynamics_loss_figure,
    lost_update_figure,
    scale_figure,
)
from playground.sections.dynamics.curves import RunCurves
from playground.sections.dynamics.nan_marks import nan_marks
from playground.sections.dynamics.pins import pins_note
from playground.sections.dynamics.summary import dynamics_summary
from playground.views import downloads
from playground.views.numbers import bullets

INTRO = """
### Many steps: float32, mixed (float32 master weights) and pure low precision
Trains three copies of the layer on the same batch, with the learning rate, loss scale and
compute dtype above: plain float32; the mixed step repeated (low-precision compute, float32
master weights); and parameters stored in the low-precision dtype itself. The lost-update meter
counts parameter entries whose update was too small to change the stored value. *Dynamic*
scaling grows the scale after a run of finite steps and halves it, skipping the update, when a
gradient overflows. *Pure-run rounding* tries the remedies for pure low precision ("Revisiting
BFloat16 Training", Zamirai et al. 2020): stochastic rounding of each stored value, or Kahan
summation with a low-precision compensation buffer.
"""
PLOT_LABELS = {
    "loss_curves": "Loss over the steps",
    "lost_updates": "Lost-update meter",
    "scale_curve": "Loss scale over the steps",
}


PIN_HELP = (
    "*Pin this run* keeps its curves; change one setting and train again, and the charts draw "
    "the pinned runs beside the new one, each named by the settings that differ."
)


class PinnedFigures(NamedTuple):
    """The three charts of a run with pinned runs overlaid (the page's own, not the API's)."""

    loss_curves: dict[str, Any]
    lost_updates: dict[str, Any]
    scale_curve: dict[str, Any]


def pinned_figures(current: RunCurves, pins: Sequence[RunCurves]) -> PinnedFigures:
    """The three charts of ``current`` with ``pins`` overlaid."""
    return PinnedFigures(
        dynamics_loss_figure(current, pins),
        lost_update_figure(current, pins),
        scale_figure(current, pins),
    )


def run_notes(current: RunCurves | None, pins: Sequence[RunCurves]) -> str:
    """The notes under the training reading: where a curve stopped being finite and why, then
    the pinned runs (Markdown; "" when there is nothing to say)."""
    lines = [f"- {mark.sentence}" for mark in nan_marks(current)] if current else []
    parts = ["\n".join(lines)] if lines else []
    if pins:
        parts.append(pins_note(current, pins))
    return "\n\n".join(parts)


class DynamicsViews(NamedTuple):
    """The dynamics endpoint's outputs, in the API's order."""

    dynamics_reading: str
    dynamics_json: dict[str, Any]
    loss_curves: dict[str, Any]
    lost_updates: dict[str, Any]
    scale_curve: dict[str, Any]
    dynamics_files: list[str] | None


def dynamics_views(dynamics: DynamicsReport, files: bool = True) -> DynamicsViews:
    """The ``dynamics`` endpoint's outputs for one training run (its files None unless
    ``files``)."""
    summary = dynamics_summary(dynamics)
    return DynamicsViews(
        dynamics_reading=bullets(summary["reading"]),
        dynamics_json=summary,
        loss_curves=dynamics_loss_figure(dynamics),
        lost_updates=lost_update_figure(dynamics),
        scale_curve=scale_figure(dynamics),
        dynamics_files=[
            downloads.dynamics_csv(dynamics),
            downloads.summary_json(summary, "dynamics"),
        ]
        if files
        else None,
    )
