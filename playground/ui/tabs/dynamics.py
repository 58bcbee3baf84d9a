"""The Training dynamics tab on the page: the run's own controls, the train button, and the
``dynamics`` endpoint (a heavy run).

Rule: the endpoint takes every settings field (``arguments.DYNAMICS``: the step's, then the
run's ``steps``, ``mode`` and ``period`` in the table's order, each named as in the table),
trains with the core and hands the run to the section (``sections.dynamics.tab``), whose figure
dicts become PlotData here. ``build`` lays out the components under the outputs' names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.train import run_dynamics
from playground.sections.dynamics import tab as dynamics_tab
from playground.ui.arguments import DYNAMICS, core_errors, validated, validated_data
from playground.ui.components import Page
from playground.ui.downloads_input import ASK_JS, checkbox, with_downloads
from playground.ui.fair_use import admit, frees_heavy_place
from playground.ui.widgets import control, plot_slot, plotted

TAB_LABEL = "Training dynamics"
# The run's own settings, shown in this tab.
RUN_FIELDS = ("steps", "mode", "period", "pure_rounding")


def _dynamics(values: dict[str, Any], files: bool) -> dynamics_tab.DynamicsViews:
    """The ``dynamics`` endpoint: the step inputs, then steps, scaling mode and growth period,
    then ``downloads`` (the run's CSV and JSON files, None unless asked for)."""
    config = validated(values)
    data = validated_data(values, config)
    with core_errors():
        dynamics = run_dynamics(config, data=data)
    views = dynamics_tab.dynamics_views(dynamics, files=files)
    return plotted(views, dynamics_tab.PLOT_LABELS)


dynamics_endpoint = with_downloads(DYNAMICS, _dynamics)
run_dynamics_event = frees_heavy_place(dynamics_endpoint)


@dataclass
class DynamicsTab:
    """The Training dynamics tab's components, by the names of the outputs they show."""

    controls: dict[str, gr.components.Component]  # the run's own settings, by field name
    train_button: gr.Button
    dynamics_reading: gr.Markdown
    dynamics_charts: gr.Column
    loss_curves: gr.Plot
    lost_updates: gr.Plot
    scale_curve: gr.Plot
    dynamics_json: gr.JSON
    dynamics_files: gr.File
    dynamics_downloads: gr.Checkbox

    @property
    def charts(self) -> dict[str, gr.Plot]:
        """No chart of the step's report: this tab's charts come from its own run."""
        return {}


def build() -> DynamicsTab:
    """The Training dynamics tab (call inside ``gr.Tabs``)."""
    with gr.Tab(TAB_LABEL):
        gr.Markdown(dynamics_tab.INTRO)
        with gr.Row():
            controls = {name: control(name) for name in RUN_FIELDS}
        train_button = gr.Button("Train the three runs", variant="primary")
        reading = gr.Markdown(elem_id="dynamics-reading")
        # No empty chart boxes before the first run: the charts appear once it has drawn them.
        with gr.Column(visible=False) as charts:
            plots = {name: plot_slot(label) for name, label in dynamics_tab.PLOT_LABELS.items()}
        with gr.Accordion("Training numbers (JSON, CSV)", open=False):
            summary = gr.JSON(label="dynamics")
            files = gr.File(label="training downloads", file_count="multiple")
            downloads = checkbox()
    return DynamicsTab(
        controls,
        train_button,
        reading,
        charts,
        **plots,
        dynamics_json=summary,
        dynamics_files=files,
        dynamics_downloads=downloads,
    )


def show_charts() -> gr.Column:
    """The charts' column made visible (after a run drew them); no output of the API."""
    return gr.Column(visible=True)


def wire(page: Page, tab: DynamicsTab) -> None:
    """The train button: every settings field, in the API's order (its own controls here).

    A successful run then shows the charts' column, in a private event of its own, so the
    ``dynamics`` endpoint's outputs stay the figures themselves.
    """
    every = page.controls | tab.controls
    tab.train_button.click(
        run_dynamics_event,
        inputs=[*(every[name] for name in DYNAMICS.order), tab.dynamics_downloads],
        outputs=[getattr(tab, name) for name in dynamics_tab.DynamicsViews._fields],
        js=ASK_JS,  # the page shows the run's files: it asks for them
        api_name="dynamics",
        preprocess=False,
        concurrency_limit=1,
        concurrency_id="heavy",  # the sweep and the training run share one lane
        show_progress="full",
        validator=admit(dynamics_endpoint),
    ).success(
        show_charts,
        outputs=tab.dynamics_charts,
        api_visibility="private",
        queue=False,
        show_progress="hidden",
    )
