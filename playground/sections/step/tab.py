"""The step section of the page: the losses and their reading, and the gradient charts.

Rule: ``views(report)`` turns a StepReport into this section's named outputs; ``build_overview``
and ``build_tabs`` lay out the components that show them, keyed by the same names, so the page
frame wires outputs to components by name and never by position.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import gradio as gr

from playground.core.report import StepReport
from playground.sections.step.charts import (
    gradient_histograms,
    gradient_scatter,
    loss_figure,
    relative_error_histogram,
    update_size_histogram,
)
from playground.sections.step.summary import reading, summarize
from playground.ui.controls import as_plot, plot_slot
from playground.views.numbers import bullets

INTRO = """
# Mixed-Precision Step Playground

One SGD step of a linear layer (`flax.nnx.Linear`), trained on a synthetic regression batch.
The **mixed** step keeps the parameters in float32 but runs the forward and backward pass on
copies rounded to a low-precision dtype: the loss is multiplied by a *loss scale* before
differentiation and the gradients are divided by it again before the update. Next to it runs
the **same step in float32**. Change any input and both steps are recomputed.
"""


class StepViews(NamedTuple):
    """This section's outputs, in the API's order."""

    headline: str
    summary: dict[str, Any]
    loss_plot: Any
    histogram_plot: Any
    scatter_plot: Any
    error_plot: Any
    update_plot: Any


PLOT_LABELS = {
    "loss_plot": "Loss before and after",
    "histogram_plot": "Gradient histograms",
    "scatter_plot": "Mixed vs float32 gradient entries",
    "error_plot": "Relative gradient error",
    "update_plot": "Update sizes",
}


def _cell(value: float, digits: int = 7) -> str:
    return f"{value:.{digits}g}" if math.isfinite(value) else f"**{value}**"


def data_line(report: StepReport, data_name: str | None) -> str:
    """Which batch the numbers come from."""
    config = report.config
    if data_name is None:
        return f"Data: the synthetic batch of data seed {config.data_seed}."
    return (
        f"Data: your file `{data_name}`, {config.n:,} rows of {config.d_in:,} inputs and "
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
        f"The mixed step uses {dtype} compute and float32 master weights. "
        f"{data_line(report, data_name)}\n\n"
        f"{bullets(sentences)}\n"
    )


def views(report: StepReport, data_name: str | None = None) -> StepViews:
    """The section's outputs for one report (of the named uploaded file, if any)."""
    sentences = reading(report)
    summary = summarize(report, sentences)
    summary["data"] = (
        {"source": "synthetic"}
        if data_name is None
        else {
            "source": "upload",
            "name": data_name,
        }
    )
    return StepViews(
        headline=headline(report, sentences, data_name),
        summary=summary,
        loss_plot=as_plot(loss_figure(report)),
        histogram_plot=as_plot(gradient_histograms(report)),
        scatter_plot=as_plot(gradient_scatter(report)),
        error_plot=as_plot(relative_error_histogram(report)),
        update_plot=as_plot(update_size_histogram(report)),
    )


def build_overview() -> dict[str, gr.components.Component]:
    """The headline and the loss chart, beside the controls."""
    return {
        "headline": gr.Markdown(elem_id="headline", label="losses"),
        "loss_plot": plot_slot(PLOT_LABELS["loss_plot"]),
    }


def build_tabs() -> dict[str, gr.components.Component]:
    """The gradient tabs (call inside ``gr.Tabs``)."""
    components = {}
    with gr.Tab("Gradient histograms"):
        components["histogram_plot"] = plot_slot(PLOT_LABELS["histogram_plot"])
    with gr.Tab("Float32 comparison"):
        components["scatter_plot"] = plot_slot(PLOT_LABELS["scatter_plot"])
        components["error_plot"] = plot_slot(PLOT_LABELS["error_plot"])
    with gr.Tab("Update sizes"):
        components["update_plot"] = plot_slot(PLOT_LABELS["update_plot"])
    return components
