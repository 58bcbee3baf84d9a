"""The precision lab on the page: the counters and key figure above the tabs, its tab, and its
endpoints ``sweep`` (a heavy run) and ``inspect``.

Rule: the endpoints validate their inputs with the core and hand the results to the section
(``sections.lab.tab``), whose plain values become Gradio's here (a figure dict as PlotData, a
ConfigError as gr.Error); ``build`` lays out the components under the outputs' names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.core.inspector import PRESETS
from playground.core.sweep import run_sweep
from playground.sections.lab import tab as lab_tab
from playground.ui.arguments import STEP, core_errors, validated, validated_data
from playground.ui.components import Page
from playground.ui.downloads_input import ASK_JS, checkbox, with_downloads
from playground.ui.fair_use import admit, frees_heavy_place
from playground.ui.widgets import plot_slot, plotted


def _sweep(values: dict[str, Any], files: bool) -> lab_tab.SweepViews:
    """The ``sweep`` endpoint (the inputs of ``step``, then ``downloads``): (reading Markdown,
    JSON, figure, the CSV and JSON files when asked for, else None)."""
    config = validated(values)
    sweep = run_sweep(config, validated_data(values, config))
    return plotted(lab_tab.sweep_views(sweep, files=files), ["sweep_plot"])


sweep_endpoint = with_downloads(STEP, _sweep)
run_sweep_event = frees_heavy_place(sweep_endpoint)


def inspect_event(number: Any) -> str:
    """The ``inspect`` endpoint: how a number is stored in each registered dtype; gr.Error for
    what is no real number within float range."""
    with core_errors():
        return lab_tab.inspection(number)


def inspect_text(text: Any) -> str:
    """The page's inspector: the typed text's table, or its refusal in place of the table."""
    return lab_tab.inspect_text(text)


@dataclass
class LabTab:
    """The Precision lab tab's components, by the names of the outputs they show."""

    activation_plot: gr.Plot
    sweep_button: gr.Button
    sweep_reading: gr.Markdown
    sweep_chart: gr.Column
    sweep_plot: gr.Plot
    sweep_json: gr.JSON
    sweep_files: gr.File
    sweep_downloads: gr.Checkbox
    number: gr.Textbox
    number_presets: gr.Dropdown
    inspection: gr.Markdown
    inspect_api: gr.Number
    controls: dict[str, gr.components.Component] = field(default_factory=dict)

    @property
    def charts(self) -> dict[str, gr.Plot]:
        """The report's charts in this tab (the page draws them when the tab is on view)."""
        return {"activation_plot": self.activation_plot}


def build_counts() -> gr.Markdown:
    """The magnitude counts (entries lost to zero, subnormal, non-finite), above the tabs."""
    return gr.Markdown(elem_id="magnitudes")


def build_figure() -> gr.Plot:
    """The magnitude figure and its caption, above the tabs: the lab's key figure."""
    with gr.Column(elem_id="magnitude-figure"):
        plot = plot_slot(lab_tab.MAGNITUDE_LABEL)
        gr.Markdown(lab_tab.PRECISION_LAB, elem_id="magnitude-caption")
    return plot


def build() -> LabTab:
    """The Precision lab tab (call inside ``gr.Tabs``)."""
    with gr.Tab(lab_tab.TAB_LABEL, id=lab_tab.TAB_LABEL):
        activation_plot = plot_slot(lab_tab.ACTIVATION_LABEL)
        gr.Markdown(lab_tab.SWEEP_INTRO)
        sweep_button = gr.Button("Sweep the loss scale", variant="primary")
        sweep_reading = gr.Markdown(elem_id="sweep-reading")
        # No empty chart box before the first sweep: the chart appears once a sweep drew it.
        with gr.Column(visible=False) as sweep_chart:
            sweep_plot = plot_slot("Loss-scale sweep")
        with gr.Accordion("Sweep numbers (JSON, CSV)", open=False):
            sweep_json = gr.JSON(label="sweep")
            sweep_files = gr.File(label="sweep downloads", file_count="multiple")
            sweep_downloads = checkbox()
        gr.Markdown(lab_tab.INSPECTOR_INTRO)
        with gr.Row():
            number = gr.Textbox(
                value="1.0001",
                label="a number",
                info="Decimal (1e-8), hexadecimal float (0x1p-24) or inf; Enter to inspect.",
                elem_id="inspect-number",
                max_lines=1,
            )
            number_presets = gr.Dropdown(
                [label for label, _ in PRESETS], label="examples", value=None
            )
        inspection = gr.Markdown(elem_id="inspection")
        # The `inspect` API endpoint's own input: a number, as scripts send it.
        inspect_api = gr.Number(visible=False)
    return LabTab(
        activation_plot,
        sweep_button,
        sweep_reading,
        sweep_chart,
        sweep_plot,
        sweep_json,
        sweep_files,
        sweep_downloads,
        number,
        number_presets,
        inspection,
        inspect_api,
    )


def _preset(label: str) -> tuple[str, str]:
    number = lab_tab.preset_number(label)
    return repr(number), inspect_event(number)


def wire(page: Page, lab: LabTab) -> None:
    """The lab's own events: the sweep button and the inspector."""
    lab.sweep_button.click(
        run_sweep_event,
        inputs=[*page.inputs(STEP.order), lab.sweep_downloads],
        outputs=[getattr(lab, name) for name in lab_tab.SweepViews._fields],
        js=ASK_JS,  # the page shows the sweep's files: it asks for them
        api_name="sweep",
        preprocess=False,
        concurrency_limit=1,
        concurrency_id="heavy",  # the sweep and the training run share one lane
        show_progress="full",
        validator=admit(sweep_endpoint),
    ).success(  # a private event, so the sweep endpoint's outputs stay the figure itself
        lambda: gr.Column(visible=True),
        outputs=lab.sweep_chart,
        api_visibility="private",
        queue=False,
        show_progress="hidden",
    )
    gr.on(
        triggers=[page.demo.load, lab.number.submit, lab.number.blur],
        fn=inspect_text,
        inputs=lab.number,
        outputs=lab.inspection,
        api_visibility="private",
        preprocess=False,
        trigger_mode="always_last",
    )
    lab.number_presets.input(
        _preset,
        lab.number_presets,
        [lab.number, lab.inspection],
        api_name="preset_number",
        api_visibility="private",
    )
    lab.inspect_api.change(
        inspect_event,
        inputs=lab.inspect_api,
        outputs=lab.inspection,
        api_name="inspect",
        preprocess=False,
    )
