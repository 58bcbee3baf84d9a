"""The training-dynamics section: three runs over many steps, their curves and their reading.

Rule: ``run_dynamics_event`` is the ``dynamics`` endpoint (every settings field, the run's own
``steps``, ``mode`` and ``period`` last, each named as in the table); ``build_tab`` lays out the
components under the names of its outputs.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gradio as gr

from playground.core.train import run_dynamics
from playground.sections.dynamics.charts import (
    dynamics_loss_figure,
    lost_update_figure,
    scale_figure,
)
from playground.sections.dynamics.summary import dynamics_summary
from playground.ui.controls import (
    ALL_SETTINGS,
    DYNAMICS_INPUTS,
    as_plot,
    control,
    core_errors,
    plot_slot,
    table_handler,
    validated,
    validated_data,
)
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


class DynamicsViews(NamedTuple):
    """The dynamics endpoint's outputs, in the API's order."""

    dynamics_reading: str
    dynamics_json: dict[str, Any]
    loss_curves: Any
    lost_updates: Any
    scale_curve: Any
    dynamics_files: list[str]


@table_handler(ALL_SETTINGS)
def run_dynamics_event(values: dict[str, Any]) -> DynamicsViews:
    """The ``dynamics`` endpoint: the step inputs, then steps, scaling mode and growth period."""
    config = validated(values)
    data = validated_data(values, config)
    with core_errors():
        dynamics = run_dynamics(config, data=data)
    summary = dynamics_summary(dynamics)
    return DynamicsViews(
        dynamics_reading=bullets(summary["reading"]),
        dynamics_json=summary,
        loss_curves=as_plot(dynamics_loss_figure(dynamics)),
        lost_updates=as_plot(lost_update_figure(dynamics)),
        scale_curve=as_plot(scale_figure(dynamics)),
        dynamics_files=[
            downloads.dynamics_csv(dynamics),
            downloads.summary_json(summary, "dynamics"),
        ],
    )


def build_tab() -> dict[str, gr.components.Component]:
    """The Training dynamics tab (call inside ``gr.Tabs``); returns its components by name."""
    components: dict[str, Any] = {}
    with gr.Tab("Training dynamics"):
        gr.Markdown(INTRO)
        with gr.Row():
            for name in ("steps", "mode", "period", "pure_rounding"):
                components[name] = control(name)
        components["train_button"] = gr.Button("Train the three runs", variant="primary")
        components["dynamics_reading"] = gr.Markdown(elem_id="dynamics-reading")
        # No empty chart boxes before the first run: the charts appear once it has drawn them.
        with gr.Column(visible=False) as charts:
            for name, label in PLOT_LABELS.items():
                components[name] = plot_slot(label)
        components["dynamics_charts"] = charts
        with gr.Accordion("Training numbers (JSON, CSV)", open=False):
            components["dynamics_json"] = gr.JSON(label="dynamics")
            components["dynamics_files"] = gr.File(
                label="training downloads", file_count="multiple"
            )
    return components


def show_charts() -> gr.Column:
    """The charts' column made visible (after a run drew them); no output of the API."""
    return gr.Column(visible=True)


def wire(components: dict[str, Any], controls: dict[str, Any]) -> None:
    """The train button: every settings field, in the table's order (its own controls here).

    A successful run then shows the charts' column, in a private event of its own, so the
    ``dynamics`` endpoint's outputs stay the figures themselves.
    """
    every = controls | components
    components["train_button"].click(
        run_dynamics_event,
        inputs=[every[name] for name in DYNAMICS_INPUTS],
        outputs=[components[name] for name in DynamicsViews._fields],
        api_name="dynamics",
        preprocess=False,
        concurrency_limit=1,
        concurrency_id="heavy",  # the sweep and the training run share one lane
        show_progress="full",
    ).success(
        show_charts,
        outputs=components["dynamics_charts"],
        api_visibility="private",
        queue=False,
        show_progress="hidden",
    )
