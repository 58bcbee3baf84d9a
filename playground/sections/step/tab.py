"""The step section: the losses and their reading, and the gradient charts, as plain values.

Rule: ``views(report)`` turns a StepReport into this section's named outputs: Markdown, the
JSON summary and a Plotly dict per chart (``texts`` and ``FIGURES`` give them one by one, so
the page can draw only what is visible). ``TABS`` names the charts each of its tabs holds; the
page (``ui.tabs.step``) lays out the components under the same names.
"""

from __future__ import annotations

import math
import re
from typing import Any, NamedTuple

import numpy as np

from playground.core.formats.dtypes import numpy_dtype
from playground.core.step.policy import policy_for
from playground.core.step.report import StepReport
from playground.sections.step.causes import cause_sentence, causes
from playground.sections.step.charts import (
    gradient_histograms,
    gradient_scatter,
    loss_figure,
    relative_error_histogram,
    update_size_histogram,
)
from playground.sections.step.summary import reading, summarize
from playground.views.numbers import bullets

INTRO = """
# Mixed-Precision Step Playground
One training step of a small model in a low-precision dtype beside the same step in float32:
float32 master parameters, forward and backward on rounded copies, the loss times a *loss scale*
S before differentiating and the gradients divided by S before the update. Settings apply on
Enter, on leaving a field or on releasing a slider.
"""
# One line for users who know PyTorch's automatic mixed precision.
PYTORCH_LINE = (
    "*From PyTorch:* compute dtype = `torch.autocast`'s dtype; loss scale = "
    '`torch.amp.GradScaler`\'s scale (loss scaling "dynamic" under Training dynamics = its '
    "growth and back-off); float32 masters = your model's own parameters, which autocast "
    "leaves in float32."
)


class StepViews(NamedTuple):
    """This section's outputs, in the API's order (each chart a Plotly figure dict)."""

    headline: str
    summary: dict[str, Any]
    loss_plot: dict[str, Any]
    histogram_plot: dict[str, Any]
    scatter_plot: dict[str, Any]
    error_plot: dict[str, Any]
    update_plot: dict[str, Any]


PLOT_LABELS = {
    "loss_plot": "Loss before and after",
    "histogram_plot": "Gradient histograms",
    "scatter_plot": "Mixed vs float32 gradient entries",
    "error_plot": "Relative gradient error",
    "update_plot": "Update sizes",
}


def _cell(value: float, digits: int = 7) -> str:
    return f"{value:.{digits}g}" if math.isfinite(value) else f"**{value}**"


def code_span(text: str) -> str:
    """One line of ``text`` as one Markdown code span, whatever backticks it holds
    (CommonMark): fenced by one backtick more than its longest run of them, and padded with a
    space on each side where it starts or ends with a backtick or a space (the renderer strips
    one space from each side of a span that has both)."""
    runs = [len(run) for run in re.findall("`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    padded = f" {text} " if text[:1] in ("`", " ") or text[-1:] in ("`", " ") else text
    return f"{fence}{padded}{fence}"


def data_line(report: StepReport, data_name: str | None) -> str:
    """Which batch the numbers come from."""
    config = report.config
    if data_name is None:
        return f"Data: the synthetic batch of data seed {config.data_seed}."
    return (
        f"Data: your file {code_span(data_name)}, {config.n:,} rows of {config.d_in:,} inputs and "
        f"{config.d_out:,} targets (input_scale, target_scale and data_seed do not apply)."
    )


def headline(report: StepReport, sentences: list[str], data_name: str | None = None) -> str:
    """The losses as a small Markdown table, the data's source, then the reading as bullets."""
    dtype = report.config.compute_dtype
    difference = report.mixed_new_loss - report.float32_new_loss
    return (
        f"| loss | initial | **new** |\n"
        f"|---|---|---|\n"
        f"| mixed {dtype} | {_cell(report.mixed_initial_loss)} "
        f"| **<span id='mixed-new-loss'>{_cell(report.mixed_new_loss)}</span>** |\n"
        f"| float32 | {_cell(report.float32_initial_loss)} "
        f"| **{_cell(report.float32_new_loss)}** |\n"
        f"| mixed - float32 | "
        f"{_cell(report.mixed_initial_loss - report.float32_initial_loss, 4)} "
        f"| {_cell(difference, 4)} |\n\n"
        + "".join(f"{note}\n\n" for note in loss_notes(report))
        + f"The mixed step uses {dtype} compute and float32 master weights. "
        f"{data_line(report, data_name)}\n\n" + (f"{bullets(sentences)}\n" if sentences else "")
    )


def loss_notes(report: StepReport) -> list[str]:
    """What the losses table needs said beside it: a mixed loss that shows no change because
    its dtype's spacing is wider than the step's change (float32's), and a step that diverges
    in float32 too (the learning rate, not the precision)."""
    notes = []
    loss_dtype = policy_for(report.config).loss_dtype
    moved = report.float32_new_loss - report.float32_initial_loss
    if (
        loss_dtype != "float32"
        and report.mixed_new_loss == report.mixed_initial_loss
        and math.isfinite(report.mixed_new_loss)
        and moved != 0
    ):
        spacing = float(
            np.spacing(np.abs(np.asarray(report.mixed_new_loss, numpy_dtype(loss_dtype))))
        )
        notes.append(
            f"The mixed loss is computed in {loss_dtype}, whose values near "
            f"{report.mixed_new_loss:.4g} are {spacing:.4g} apart: this step moved float32's loss "
            f"by {abs(moved):.3g}, less than that, so the mixed loss shows no change (the float32 "
            "line shows the step)."
        )
    if "lr_divergence" in causes(report):
        notes.append(cause_sentence("lr_divergence", report))
    return notes


def _summary(report: StepReport, sentences: list[str], data_name: str | None) -> dict[str, Any]:
    summary = summarize(report, sentences)
    summary["data"] = (
        {"source": "synthetic"} if data_name is None else {"source": "upload", "name": data_name}
    )
    return summary


def texts(report: StepReport, data_name: str | None = None) -> tuple[str, dict[str, Any]]:
    """The headline Markdown and the JSON summary of one report (of the named upload, if any)."""
    sentences = reading(report)
    return headline(report, sentences, data_name), _summary(report, sentences, data_name)


def page_texts(report: StepReport, data_name: str | None = None) -> tuple[str, str, dict[str, Any]]:
    """The page's split of ``texts``: the losses table with the data line (top of the page),
    the reading as bullets (under the key figure), and the JSON summary."""
    sentences = reading(report)
    summary = _summary(report, sentences, data_name)
    return headline(report, [], data_name), bullets(sentences), summary


# Each chart of this section, by output name: the function that draws it from a report.
FIGURES = {
    "loss_plot": loss_figure,
    "histogram_plot": gradient_histograms,
    "scatter_plot": gradient_scatter,
    "error_plot": relative_error_histogram,
    "update_plot": update_size_histogram,
}


def views(report: StepReport, data_name: str | None = None) -> StepViews:
    """The section's outputs for one report (of the named uploaded file, if any)."""
    text, summary = texts(report, data_name)
    return StepViews(
        headline=text,
        summary=summary,
        **{name: draw(report) for name, draw in FIGURES.items()},
    )


# The tabs of this section: tab label -> the charts it holds (each a key of FIGURES).
TABS = {
    "Loss": ("loss_plot",),
    "Gradient histograms": ("histogram_plot",),
    "Float32 comparison": ("scatter_plot", "error_plot"),
    "Update sizes": ("update_plot",),
}
