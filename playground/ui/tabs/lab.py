"""The precision lab on the page: the counters and key figure above the tabs, its tab, and its
endpoints ``sweep`` (a heavy run) and ``inspect``.

Rule: the endpoints validate their inputs with the core and hand the results to the section
(``sections.lab.tab``), whose plain values become Gradio's here (a figure dict as a gr.Plot
value, a ConfigError as gr.Error); ``build`` lays out the components under the outputs' names.

The sweep keeps the settings it ran with (its JSON's ``config``); whenever a control is
committed or the results change, a banner over it names what differs, its results are dimmed
(the page's ``stale-banner`` style) and a rerun button shows. The inspector's bit rows are
buttons: pressing one sends that format's pattern with the bit flipped (``0x3c01:float16``),
which is typed into the box and inspected, as if it had been typed.

A sweep's progress (its place in the queue, then its time) and a refusal's status show in their
own box under the button (``#sweep-progress``), never over the shown sweep: a refused sweep
leaves the last one in place (stale under its banner when the controls changed), and its message
appears once, in Gradio's error pop-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.core.inspector.inspector import PRESETS
from playground.core.runs.sweep import run_sweep
from playground.sections.lab import block_list, inspector_view, sweep_status
from playground.sections.lab import tab as lab_tab
from playground.ui.arguments import STEP, core_errors, validated, validated_data
from playground.ui.components import Page, StaleCheck
from playground.ui.downloads_input import ask_js, checkbox, page_inputs, with_downloads
from playground.ui.fair_use import admit, frees_heavy_place
from playground.ui.tabs.lab_assets import BITS_CSS, BITS_JS, BLOCKS_CSS
from playground.ui.widgets import plot_slot, plotted, quiet_progress, session_state

# The inspector's text as the page opens.
FIRST_NUMBER = "1.0001"


def _sweep(values: dict[str, Any], files: bool) -> lab_tab.SweepViews:
    """The ``sweep`` endpoint (the inputs of ``step``, then ``downloads``): (reading Markdown,
    JSON, figure, the CSV and JSON files when asked for, else None)."""
    config = validated(values)
    sweep = run_sweep(config, validated_data(values, config))
    return plotted(lab_tab.sweep_views(sweep, files=files), ["sweep_plot"])


sweep_endpoint = with_downloads(STEP, _sweep)
run_sweep_event = frees_heavy_place(sweep_endpoint)


def inspect_event(number: Any) -> str:
    """The ``inspect`` endpoint: how a number (or the inspector's text: ``nan``, ``1/3``,
    ``0x3c00:float16``) is stored in each registered dtype; gr.Error for what it cannot read."""
    with core_errors():
        return inspector_view.inspection(number)


def inspect_text(text: Any, inspected: Any = None) -> tuple[Any, ...]:
    """The page's inspector: the typed text's table and bit rows (or its refusal in place of the
    table), and the text they show. A text already on view changes nothing: leaving the box
    after Enter must not draw the bit rows again under a pointer about to press one of them."""
    if inspected is not None and text == inspected:
        return gr.skip(), gr.skip(), gr.skip()
    return (*inspector_view.inspector_views(text), text)


def flip_bit(event: gr.EventData) -> tuple[Any, ...]:
    """A pressed bit: its flipped pattern typed into the box, then inspected."""
    text = str(event.bits)
    return (text, *inspect_text(text))


def sweep_check(ran_with: Any, *controls: Any) -> tuple[str, Any]:
    """The stale banner over the sweep and the rerun button, for the controls now."""
    banner = sweep_status.stale_banner(ran_with, STEP.values(controls))
    return banner, gr.Button(visible=bool(banner))


def sweep_commit_check(ran_with: Any, *controls: Any) -> tuple[Any, Any]:
    """``sweep_check`` as every commit runs it: before a first sweep no banner or rerun button
    can be on view, so it answers skips (updates would cost a component rebuild each)."""
    if ran_with is None:
        return gr.skip(), gr.skip()
    return sweep_check(ran_with, *controls)


def sweep_done(summary: Any, *controls: Any) -> tuple[Any, ...]:
    """After a sweep: its chart shown, the settings it ran with kept, its banner checked."""
    ran_with = summary.get("config") if isinstance(summary, dict) else None
    return (gr.Column(visible=True), ran_with, *sweep_check(ran_with, *controls))


@dataclass
class LabTab:
    """The Precision lab tab's components, by the names of the outputs they show."""

    activation_plot: gr.Plot
    sweep_button: gr.Button
    sweep_progress: gr.Markdown  # where a sweep's progress and a refusal's status show
    sweep_status: gr.Markdown
    sweep_rerun: gr.Button
    sweep_ran_with: gr.State
    sweep_reading: gr.Markdown
    sweep_chart: gr.Column
    sweep_plot: gr.Plot
    sweep_json: gr.JSON
    sweep_files: gr.File
    sweep_downloads: gr.Checkbox
    number: gr.Textbox
    number_presets: gr.Dropdown
    inspection: gr.Markdown
    bits: gr.HTML
    inspected: gr.State  # the text the table and bit rows show
    inspect_api: gr.Number
    numbers: gr.Textbox  # a list of numbers, seen as the block recipes store it
    blocks: gr.HTML
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
        gr.Markdown(lab_tab.sweep_intro())
        sweep_button = gr.Button("Sweep the loss scale", variant="primary")
        sweep_progress = gr.Markdown(min_height=40, elem_id="sweep-progress")
        # The sweep's results, dimmed under the banner when the controls have moved on.
        with gr.Column(elem_id="sweep-results"):
            sweep_status_md = gr.Markdown(elem_id="sweep-status")
            sweep_rerun = gr.Button(sweep_status.RERUN_LABEL, visible=False, elem_id="sweep-rerun")
            sweep_reading = gr.Markdown(elem_id="sweep-reading")
            # No empty chart box before the first sweep: the chart appears once a sweep drew it.
            with gr.Column(visible=False) as sweep_chart:
                sweep_plot = plot_slot("Loss-scale sweep")
        sweep_ran_with = session_state(None)
        with gr.Accordion("Sweep numbers (JSON, CSV)", open=False):
            sweep_json = gr.JSON(label="sweep")
            sweep_files = gr.File(label="sweep downloads", file_count="multiple")
            sweep_downloads = checkbox()
        gr.Markdown(lab_tab.INSPECTOR_INTRO)
        # The inspector and the block list open on their first texts, drawn here once: no
        # event at each page load, whose first calls would compile before the first chart.
        first_table, first_bits = inspector_view.inspector_views(FIRST_NUMBER)
        with gr.Row():
            number = gr.Textbox(
                value=FIRST_NUMBER,
                label="a number",
                info=inspector_view.HELP,
                elem_id="inspect-number",
                max_lines=1,
            )
            number_presets = gr.Dropdown(
                [label for label, _ in PRESETS], label="examples", value=None
            )
        # The bit rows first, right under the box (as Float Toy has them), then the table.
        bits = gr.HTML(
            first_bits,
            elem_id="inspect-bits",
            js_on_load=BITS_JS,
            css_template=BITS_CSS,
            padding=False,
        )
        inspection = gr.Markdown(first_table, elem_id="inspection")
        # The `inspect` API endpoint's own input: a number, as scripts send it.
        inspected = session_state(FIRST_NUMBER)
        inspect_api = gr.Number(visible=False)
        numbers = gr.Textbox(
            value=block_list.DEFAULT_LIST,
            label="a list of numbers, in blocks",
            info=block_list.help_text(),
            elem_id="inspect-list",
            max_lines=1,
        )
        # Its table scrolls inside its own box on a phone.
        blocks = gr.HTML(
            block_list.block_list_view(block_list.DEFAULT_LIST),
            elem_id="inspect-blocks",
            css_template=BLOCKS_CSS,
            padding=False,
        )
    return LabTab(
        *(activation_plot, sweep_button, sweep_progress, sweep_status_md, sweep_rerun),
        sweep_ran_with,
        *(sweep_reading, sweep_chart, sweep_plot, sweep_json, sweep_files, sweep_downloads),
        *(number, number_presets, inspection, bits, inspected, inspect_api, numbers, blocks),
    )


def _preset(label: str) -> tuple[Any, ...]:
    text = lab_tab.preset_number(label)
    return (text, *inspect_text(text))


def checks(page: Page, lab: LabTab) -> list[StaleCheck]:
    """The sweep's stale check, which every commit of the step's controls runs (an example, a
    preset and the URL commit them too)."""
    controls = page.inputs(STEP.order)
    return [
        StaleCheck(
            sweep_commit_check,
            (lab.sweep_ran_with, *controls),
            (lab.sweep_status, lab.sweep_rerun),
        )
    ]


def wire(page: Page, lab: LabTab) -> None:
    """The lab's own events: the sweep (and its rerun), the inspector (the sweep's stale check
    is ``checks``')."""
    controls = page.inputs(STEP.order)
    gr.on(
        triggers=[lab.sweep_button.click, lab.sweep_rerun.click],
        fn=run_sweep_event,
        inputs=page_inputs(STEP, controls, lab.sweep_downloads),
        outputs=[getattr(lab, name) for name in lab_tab.SweepViews._fields],
        js=ask_js(STEP),  # the page shows the sweep's files: it asks for them
        api_name="sweep",
        preprocess=False,
        concurrency_limit=1,
        concurrency_id="heavy",  # the sweep and the training run share one concurrency group
        show_progress="full",
        show_progress_on=[lab.sweep_progress],  # never over the shown sweep (module rule)
        validator=admit(sweep_endpoint),
    ).success(  # a private event, so the sweep endpoint's outputs stay the figure itself
        sweep_done,
        inputs=[lab.sweep_json, *controls],
        outputs=[lab.sweep_chart, lab.sweep_ran_with, lab.sweep_status, lab.sweep_rerun],
        api_visibility="private",
        queue=False,
        preprocess=False,
        **quiet_progress(lab.sweep_ran_with),  # not on the chart it shows (ui.widgets)
    )
    inspector = [lab.inspection, lab.bits, lab.inspected]
    gr.on(
        triggers=[lab.number.submit, lab.number.blur],
        fn=inspect_text,
        inputs=[lab.number, lab.inspected],
        outputs=inspector,
        api_visibility="private",
        preprocess=False,
        trigger_mode="always_last",
        # No progress cover over the bit rows: a press on a bit while the box is being left
        # (which sends the box's text) must land on the bit, not on a cover.
        show_progress="hidden",
    )
    lab.bits.click(
        flip_bit,
        None,
        [lab.number, *inspector],
        api_visibility="private",
        show_progress="hidden",
    )
    lab.number_presets.input(
        _preset,
        lab.number_presets,
        [lab.number, *inspector],
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
    gr.on(
        triggers=[lab.numbers.submit, lab.numbers.blur],
        fn=block_list.block_list_view,
        inputs=lab.numbers,
        outputs=lab.blocks,
        api_visibility="private",
        preprocess=False,
        trigger_mode="always_last",
    )
