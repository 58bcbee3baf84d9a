"""The page frame: controls, the three sections, and the events that join them.

Rule: this is the only module that knows every section. It lays out the controls (read from the
settings table), asks each section for its components, and wires each event's outputs to
components by name: a handler returns a NamedTuple whose field order is the API's output order,
and the components are looked up by those field names. The main event, ``step``, serves the page
and the API; it runs at page load and whenever an input changes, and only the latest change is
run (``trigger_mode="always_last"``). The heavier ``sweep`` and ``dynamics`` run on a button.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gradio as gr
from starlette.middleware import Middleware

from playground.core.report import run_report
from playground.sections.dynamics import tab as dynamics_tab
from playground.sections.lab import tab as lab_tab
from playground.sections.step import export
from playground.sections.step import tab as step_tab
from playground.settings import ConfigError
from playground.ui.controls import (
    DEFAULTS,
    STEP_FIELDS,
    control,
    core_errors,
    table_handler,
    validated,
    validated_data,
)
from playground.ui.public import HeavyRunMiddleware, PublicBlocks
from playground.ui.url_state import wire_url_state
from playground.views import downloads

TITLE = "Mixed-Precision Step Playground"
LOSS_SCALE_PRESETS = {
    "2^0 = 1": 1.0,
    "2^8": 2.0**8,
    "2^10": 2.0**10,
    "2^15": 2.0**15,
    "2^24": 2.0**24,
}
# Inputs of the `step` event, in API order: every input has the table's default, so a
# gradio_client call may stop after any of them.
INPUT_ORDER = STEP_FIELDS
# Each one teaches something; values are (label, overrides of the defaults).
EXAMPLES = (
    ("bfloat16, well behaved", {}),
    (
        "float16, tiny data, S = 1: gradients flush to 0",
        {
            "compute_dtype": "float16",
            "input_scale": 2.0**-12,
            "target_scale": 2.0**-12,
            "loss_scale": 1.0,
        },
    ),
    (
        "same data, S = 2^15: the gradients come back",
        {
            "compute_dtype": "float16",
            "input_scale": 2.0**-12,
            "target_scale": 2.0**-12,
            "loss_scale": 2.0**15,
        },
    ),
    (
        "float16, S = 2^16: the scale overflows",
        {"compute_dtype": "float16", "loss_scale": 2.0**16},
    ),
)


class StepOutputs(NamedTuple):
    """The ``step`` endpoint's outputs, in the API's order (the step's text, the lab's counters,
    then every chart of the report)."""

    headline: str
    summary: dict[str, Any]
    magnitudes: str
    loss_plot: Any
    histogram_plot: Any
    scatter_plot: Any
    error_plot: Any
    update_plot: Any
    magnitude_plot: Any
    activation_plot: Any


# The label of each chart the step event fills, in output order.
FIGURE_LABELS = (
    *step_tab.PLOT_LABELS.values(),
    "Gradient magnitudes against the dtype's ranges",
    lab_tab.ACTIVATION_LABEL,
)


@table_handler(STEP_FIELDS)
def run_step(values: dict[str, Any]) -> StepOutputs:
    """The ``step`` endpoint: (headline Markdown, JSON summary, magnitude counters, figures...).

    Raises gr.Error with the core's message (field and allowed range) on invalid input.
    """
    config = validated(values)
    data = validated_data(values, config)
    report = run_report(config, data)
    views = step_tab.views(report, data.name if data else None)
    parts = views._asdict() | lab_tab.step_views(report)._asdict()
    return StepOutputs(**parts)


@table_handler(STEP_FIELDS)
def run_downloads(values: dict[str, Any]) -> list[str]:
    """The ``downloads`` endpoint (same inputs as ``step``): the per-entry gradients as CSV and
    the JSON summary, as files. Its own event, so the step itself never writes files."""
    config = validated(values)
    data = validated_data(values, config)
    report = run_report(config, data)
    summary = step_tab.views(report, data.name if data else None).summary
    with core_errors():
        try:
            return [downloads.gradients_csv(report), downloads.summary_json(summary, "summary")]
        except ValueError as error:  # a model too large for a CSV
            raise ConfigError("n", str(error)) from None


class ExportOutputs(NamedTuple):
    """The ``export`` endpoint's outputs: the script's text and the same as a .py file."""

    script: str
    script_file: str


@table_handler(STEP_FIELDS)
def run_export(values: dict[str, Any]) -> ExportOutputs:
    """The ``export`` endpoint (same inputs as ``step``): a standalone script that reruns this
    step and its float32 twin with jax, flax, optax and numpy only, and prints their new losses
    as its last line of JSON."""
    config = validated(values)
    with core_errors():
        if values.get("data") is not None:
            raise ConfigError(
                "data",
                "data: the exported script rebuilds the synthetic batch; clear your uploaded file "
                "to export",
            )
        script = export.export_script(config)
    return ExportOutputs(script, downloads.text_file(script, export.export_filename(config)))


def preset_loss_scale(label: str) -> float:
    """The loss scale of a preset label."""
    return LOSS_SCALE_PRESETS[label]


def ping() -> str:
    """A trivial endpoint on the same server, the baseline of bench/bench_app.py."""
    return "pong"


def build_demo() -> gr.Blocks:
    """The page, top to bottom: intro, controls beside the headline, the section tabs, JSON."""
    # Files Gradio caches (uploads, downloads) are deleted hourly once an hour old.
    with PublicBlocks(title=TITLE, delete_cache=(3600, 3600)) as demo:
        gr.Markdown(step_tab.INTRO)
        controls: dict[str, Any] = {}
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=280):
                with gr.Group():
                    controls["model_seed"] = control("model_seed")
                    controls["data_seed"] = control("data_seed")
                for name in ("n", "d_in", "d_out", "lr"):
                    controls[name] = control(name)
                presets = gr.Radio(list(LOSS_SCALE_PRESETS), label="loss scale presets", value=None)
                controls["loss_scale"] = control("loss_scale")
                controls["compute_dtype"] = control("compute_dtype")
                with gr.Accordion("Data magnitudes", open=False):
                    controls["input_scale"] = control("input_scale")
                    controls["target_scale"] = control("target_scale")
                controls["data"] = gr.File(
                    label="your data (CSV): the last D_out columns are the targets",
                    file_types=[".csv"],
                    elem_id="data",
                )
                with gr.Accordion("Model and optimizer", open=False):
                    for name in ("model", "hidden_layers", "hidden_width", "activation"):
                        controls[name] = control(name)
                    controls["optimizer"] = control("optimizer")
                with gr.Accordion("Float8 scaling", open=False):
                    controls["fp8_scaling"] = control("fp8_scaling")
                    controls["amax_history"] = control("amax_history")
            with gr.Column(scale=2, min_width=320):
                inputs = [controls[name] for name in (*INPUT_ORDER, "data")]
                gr.Examples(
                    examples=[
                        [{**DEFAULTS, **overrides}[name] for name in INPUT_ORDER] + [None]
                        for _, overrides in EXAMPLES
                    ],
                    example_labels=[label for label, _ in EXAMPLES],
                    inputs=inputs,
                    label="Examples that each teach something",
                )
                components = step_tab.build_overview()
        with gr.Tabs():
            components |= step_tab.build_tabs()
            components |= lab_tab.build_tab()
            dynamics = dynamics_tab.build_tab()
        with gr.Accordion("All numbers (JSON, as returned by the API) and downloads", open=False):
            components["summary"] = gr.JSON(label="summary")
            prepare = gr.Button("Prepare the gradients CSV and the JSON summary")
        with gr.Accordion("The code: rerun this step in a notebook", open=False):
            export_button = gr.Button("Export this step as a standalone script")
            script = gr.Code(language="python", label="script", elem_id="export-script")
            script_file = gr.File(label="script (.py)", elem_id="export-file")
            files = gr.File(label="downloads", file_count="multiple", elem_id="downloads")

        presets.input(preset_loss_scale, presets, controls["loss_scale"], api_visibility="private")
        gr.on(
            triggers=[demo.load] + [component.change for component in inputs],
            fn=run_step,
            inputs=inputs,
            outputs=[components[name] for name in StepOutputs._fields],
            api_name="step",
            trigger_mode="always_last",
            preprocess=False,  # StepConfig checks every value and names the field on error
            concurrency_limit=1,
        )
        export_button.click(
            run_export,
            inputs=inputs,
            outputs=[script, script_file],
            api_name="export",
            preprocess=False,
            concurrency_limit=1,
        )
        prepare.click(
            run_downloads,
            inputs=inputs,
            outputs=files,
            api_name="downloads",
            preprocess=False,
            concurrency_limit=1,
        )
        lab_tab.wire(demo, components, inputs)
        dynamics_tab.wire(dynamics, controls)
        gr.api(ping, api_name="ping")
        wire_url_state(demo, controls | dynamics)  # last: the step waits for the URL
    return demo


CSS = """
#headline table, #inspection table, #magnitudes table { display: block; overflow-x: auto; }
#headline td, #inspection td, #magnitudes td { white-space: nowrap; }
@media (max-width: 480px) {
  #headline th, #headline td, #magnitudes th, #magnitudes td { padding: 4px 6px; }
}
"""


# Uploads: the largest file the page needs (user data, at most 1 MB of CSV) with room to spare.
MAX_FILE_SIZE = "2mb"
# Sessions whose state Gradio keeps (oldest dropped first); each holds a copy of the page's
# outputs, about 0.2 MB, so this bounds that memory near 40 MB.
SESSION_CAPACITY = 200


def launch_kwargs(demo: gr.Blocks) -> dict[str, Any]:
    """Options for ``demo.launch``: a public Space that shares nothing but this page.

    Bounded: uploads to MAX_FILE_SIZE, kept sessions to SESSION_CAPACITY, and one heavy run per
    visitor (``ui.public.HeavyRunMiddleware``, which reads each event's API name from ``demo``).
    """
    api_names = {index: fn.api_name for index, fn in demo.fns.items()}
    return {
        "share": False,
        "show_error": True,
        "max_threads": 8,
        "max_file_size": MAX_FILE_SIZE,
        "state_session_capacity": SESSION_CAPACITY,
        "footer_links": ["api", "gradio"],
        "theme": gr.themes.Soft(),
        "css": CSS,
        "app_kwargs": {"middleware": [Middleware(HeavyRunMiddleware, api_names=lambda: api_names)]},
    }


def queue_kwargs() -> dict[str, Any]:
    """One run at a time per event (the sweep and the training share one heavy lane).

    The queue's bound is generous because no visitor can hold more than one heavy place in it
    (``ui.public``): it only stops a crowd, never one visitor's flood.
    """
    return {"max_size": 256, "default_concurrency_limit": 1}
