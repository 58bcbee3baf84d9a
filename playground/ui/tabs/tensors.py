"""The "Your tensors" tab and its endpoint ``tensors``: a client's safetensors file.

Rule: the endpoint's input ``file`` is an upload named ``*.safetensors`` in Gradio's upload
folder (``ui.uploads.uploaded_file``); it is read once by the core (``core.tensors``: checked
and capped before its data is read), deleted at once whether it was read or refused, and
analysed; its outputs are the section's (``sections.tensors.tab``), a refusal gr.Error naming
``file`` and what is wrong. The page runs the same on an upload and keeps the report (counts
only, never the values) in the session, so choosing a tensor or a shaded format redraws from
it without the file.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.core.bounds import ConfigError
from playground.core.tensors.formats import VALUE_FORMATS
from playground.core.tensors.report import TensorsReport, analyse_file
from playground.sections.tensors import tab as tensors_tab
from playground.sections.tensors.summary import TABLE_DATATYPES, TABLE_NOTE
from playground.ui.arguments import core_errors
from playground.ui.components import Page
from playground.ui.uploads import uploaded_file
from playground.ui.widgets import as_plot, quiet_progress, session_state

TAB_LABEL = tensors_tab.TAB_LABEL
FIELD = "file"
SUFFIX = ".safetensors"
# Analyses at once: each reads a tensor (or its sample of at most TENSOR_SAMPLE_VALUES) at a
# time, tens of MB with its float64 copies, and the GIL is mostly held.
CONCURRENCY = 2


def analyse_upload(file: Any) -> TensorsReport:
    """The report of the uploaded file (see the module rule); ConfigError naming ``file``."""
    located = uploaded_file(file, FIELD)
    if located is None:
        raise ConfigError(FIELD, f"{FIELD}: upload a {SUFFIX} file")
    path, name = located
    try:
        if not name.lower().endswith(SUFFIX):
            raise ConfigError(FIELD, f"file {name!r}: only {SUFFIX} files are read here")
        with open(path, "rb") as opened:
            return analyse_file(opened, os.fstat(opened.fileno()).st_size, name)
    finally:
        path.unlink(missing_ok=True)  # read or refused: nothing of the client's stays on disk


def tensors_endpoint(file: Any) -> tuple[dict[str, Any], str]:
    """The ``tensors`` endpoint: (the JSON, the file's sentences as Markdown)."""
    with core_errors():
        views = tensors_tab.tensors_views(analyse_upload(file))
    return views.tensors_json, views.tensors_reading


def upload_event(file: Any) -> tuple[Any, ...]:
    """The page's upload: every output of the tab, and the report kept for later choices."""
    with core_errors():
        report = analyse_upload(file)
    views = tensors_tab.tensors_views(report)
    return (
        views.tensors_json,
        gr.Dataframe(value=views.tensors_table, visible=True),
        views.tensors_reading,
        views.tensor_reading,
        as_plot(views.tensor_plot),
        gr.Dropdown(choices=views.tensor_names, value=views.tensor_name, interactive=True),
        gr.Dropdown(value=views.tensor_format, interactive=True),
        report,
        gr.Column(visible=True),
    )


def choose_event(report: TensorsReport | None, name: Any, fmt: Any) -> tuple[Any, ...]:
    """A chosen tensor or shaded format: its sentences and figure, from the kept report."""
    if report is None or name not in [tensor.name for tensor in report.tensors]:
        return gr.skip(), gr.skip()
    reading, figure = tensors_tab.tensor_views(report, name, fmt)
    return reading, as_plot(figure)


@dataclass
class TensorsTab:
    """The tab's components, by the names of the outputs they show; no step charts."""

    file: gr.File
    tensors_json: gr.JSON
    tensors_table: gr.Dataframe
    tensors_reading: gr.Markdown
    tensor_reading: gr.Markdown
    tensor_plot: gr.Plot
    tensor_name: gr.Dropdown
    tensor_format: gr.Dropdown
    report: gr.State
    api: gr.Button
    chosen: gr.Column  # the chosen tensor's choices, sentences and figure
    charts: dict[str, gr.Plot] = field(default_factory=dict)
    controls: dict[str, gr.components.Component] = field(default_factory=dict)


def build() -> TensorsTab:
    """The tab (call inside ``gr.Tabs``)."""
    with gr.Tab(TAB_LABEL, id=TAB_LABEL):
        gr.Markdown(tensors_tab.INTRO, elem_id="tensors-intro")
        file = gr.File(
            label=f"your tensors ({SUFFIX})", file_types=[SUFFIX], elem_id="tensors-file"
        )
        reading = gr.Markdown(label="reading", elem_id="tensors-reading")
        table = gr.Dataframe(
            label=TABLE_NOTE,
            interactive=False,
            visible=False,
            max_height=360,
            wrap=True,  # a long name wraps in its cell: the table fits the page at 1400 px
            column_widths=tensors_tab.TABLE_WIDTHS,
            datatype=TABLE_DATATYPES,
            elem_id="tensors-table",
        )
        # No empty chart or choices before a file: they appear once an upload has filled them.
        with gr.Column(visible=False) as chosen:
            with gr.Row():
                name = gr.Dropdown([], label="tensor", elem_id="tensor-name", interactive=False)
                fmt = gr.Dropdown(
                    list(VALUE_FORMATS),
                    label="shade the ranges of",
                    elem_id="tensor-format",
                    interactive=False,
                )
            tensor_reading = gr.Markdown(elem_id="tensor-reading")
            plot = gr.Plot(label=tensors_tab.FIGURE_LABEL, show_label=False, elem_id="tensor-plot")
        with gr.Accordion("Every count (JSON, as the API returns it)", open=False):
            summary = gr.JSON(label="tensors", elem_id="tensors-json")
        # The `tensors` API endpoint's own trigger: scripts call it, the page never clicks it.
        api = gr.Button(visible=False)
        report = session_state(None)
    return TensorsTab(
        file, summary, table, reading, tensor_reading, plot, name, fmt, report, api, chosen
    )


def wire(page: Page, tab: TensorsTab) -> None:
    """The upload (the page's own, private), the endpoint, and the two choices."""
    outputs = [tab.tensors_json, tab.tensors_table, tab.tensors_reading, tab.tensor_reading]
    outputs += [tab.tensor_plot, tab.tensor_name, tab.tensor_format, tab.report, tab.chosen]
    tab.file.upload(
        upload_event,
        inputs=tab.file,
        outputs=outputs,
        # Its progress shows on the reading, not on every output: the browser would read the
        # figure and the column's every child again at each later status change (ui.widgets).
        show_progress_on=[tab.tensors_reading],
        api_visibility="private",
        preprocess=False,
        concurrency_limit=CONCURRENCY,
        concurrency_id="tensors",
    )
    tab.api.click(
        tensors_endpoint,
        inputs=tab.file,
        outputs=[tab.tensors_json, tab.tensors_reading],
        api_name="tensors",
        preprocess=False,
        concurrency_limit=CONCURRENCY,
        concurrency_id="tensors",
    )
    gr.on(
        triggers=[tab.tensor_name.input, tab.tensor_format.input],
        fn=choose_event,
        inputs=[tab.report, tab.tensor_name, tab.tensor_format],
        outputs=[tab.tensor_reading, tab.tensor_plot],
        api_visibility="private",
        preprocess=False,
        **quiet_progress(tab.report),  # not on the figure it draws (ui.widgets)
    )
