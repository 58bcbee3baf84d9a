"""The page frame: controls, the three sections, and the events that join them.

Rule: this is the only module that knows every section. It lays out the controls (read from the
settings table), asks each section for its components, and wires each event's outputs to
components by name: a handler returns a NamedTuple (API events) or a dict keyed by component
name (the page's own events, ``ui.page_events``), never a tuple kept in order by hand.

The API's ``step`` endpoint returns every output and raises gr.Error on a bad input; the page
runs its own private events instead: a commit (Enter, leaving a field, releasing a slider,
picking a choice, an example, a preset) answers with what is above the tabs, then the open
tab's charts; a bad value gets a notice under its field. The heavier ``sweep`` and ``dynamics``
run on a button.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import gradio as gr
from starlette.middleware import Middleware

from playground.core.report import run_report
from playground.core.settings import LOSS_SCALE_MAX, LOSS_SCALE_MIN, ConfigError
from playground.sections.dynamics import tab as dynamics_tab
from playground.sections.lab import tab as lab_tab
from playground.sections.step import export
from playground.sections.step import tab as step_tab
from playground.ui import page_events
from playground.ui.controls import (
    DEFAULTS,
    STEP_FIELDS,
    STEP_INPUTS,
    STEP_SETTINGS,
    commit_triggers,
    control,
    core_errors,
    table_handler,
    validated,
    validated_data,
)
from playground.ui.examples import EXAMPLES, LESSONS
from playground.ui.page_events import LOSS_SCALE_PRESETS
from playground.ui.public import HeavyRunMiddleware, PublicBlocks
from playground.ui.url_state import wire_url_state
from playground.views import downloads

TITLE = "Mixed-Precision Step Playground"
# The settings of the `step` event that come before `data`, in API order (then `data`, then
# the float8 settings): every input has a default, so a call may stop after any of them.
INPUT_ORDER = STEP_FIELDS
LOSS_SCALE_MIN_EXPONENT = math.ceil(math.log2(LOSS_SCALE_MIN))
LOSS_SCALE_MAX_EXPONENT = math.floor(math.log2(LOSS_SCALE_MAX))
__all__ = ["EXAMPLES", "LOSS_SCALE_PRESETS", "build_demo", "run_step"]


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
    lab_tab.MAGNITUDE_LABEL,
    lab_tab.ACTIVATION_LABEL,
)


@table_handler(STEP_SETTINGS)
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


@table_handler(STEP_SETTINGS)
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


@table_handler(STEP_SETTINGS)
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


def _notice(name: str) -> gr.Markdown:
    """The notice under a control: the core's message when its value is invalid."""
    return gr.Markdown(visible=False, elem_id=f"{name}-notice", elem_classes=["field-notice"])


def _controls_column(controls: dict[str, Any], notices: dict[str, Any]) -> dict[str, Any]:
    """The settings, each with its notice; returns the loss-scale exponent and preset controls."""

    def add(name: str) -> None:
        controls[name] = control(name)
        notices[name] = _notice(name)

    with gr.Group():
        add("model_seed")
        add("data_seed")
    for name in ("n", "d_in", "d_out", "lr", "loss_scale"):
        add(name)
    extra = {
        "loss_scale_exponent": gr.Slider(
            LOSS_SCALE_MIN_EXPONENT,
            LOSS_SCALE_MAX_EXPONENT,
            value=page_events.exponent_of(DEFAULTS["loss_scale"]),
            step=1,
            label="loss scale as a power of two: log2 S",
            info="Release to set S = 2^k.",
            elem_id="loss-scale-exponent",
            elem_classes=["commit-slider"],
        ),
        "loss_scale_presets": gr.Radio(
            list(LOSS_SCALE_PRESETS),
            label="loss scale presets",
            value=page_events.preset_of(DEFAULTS["loss_scale"]),
            elem_id="loss-scale-presets",
        ),
    }
    add("compute_dtype")
    with gr.Accordion("Data magnitudes", open=False):
        add("input_scale")
        add("target_scale")
    controls["data"] = gr.File(
        label="your data (CSV): the last D_out columns are the targets",
        file_types=[".csv"],
        elem_id="data",
    )
    notices["data"] = _notice("data")
    with gr.Accordion("Model and optimizer", open=False):
        for name in ("model", "hidden_layers", "hidden_width", "activation", "optimizer"):
            add(name)
    with gr.Accordion("Float8 scaling", open=False):
        add("fp8_scaling")
        add("amax_history")
    return extra


def build_demo() -> gr.Blocks:
    """The page: intro and examples; the controls beside the results (the headline and the
    magnitude figure first, then the section tabs); then the JSON, downloads and code export."""
    # Files Gradio caches (uploads, downloads) are deleted hourly once an hour old.
    with PublicBlocks(title=TITLE, delete_cache=(3600, 3600)) as demo:
        gr.Markdown(step_tab.INTRO, elem_id="intro")
        gr.Markdown(step_tab.PYTORCH_LINE, elem_id="pytorch-line")
        with gr.Row(elem_id="examples"):
            example_buttons = [
                gr.Button(lesson.label, size="sm", elem_id=f"example-{index}")
                for index, lesson in enumerate(LESSONS)
            ]
        controls: dict[str, Any] = {}
        notices: dict[str, Any] = {}
        with gr.Row(equal_height=False, elem_id="workspace"):
            with gr.Column(scale=1, min_width=300, elem_id="controls"):
                extra = _controls_column(controls, notices)
            with gr.Column(scale=3, min_width=320, elem_id="results"):
                status = gr.Markdown(visible=False, elem_id="status")
                components: dict[str, Any] = {}
                with gr.Row(equal_height=False):
                    with gr.Column(scale=2, min_width=300):
                        components["headline"] = step_tab.build_headline()
                    with gr.Column(scale=3, min_width=300):
                        components["magnitudes"] = lab_tab.build_counts()
                components |= lab_tab.build_figure()
                reading = gr.Markdown(elem_id="reading")
                caption = gr.Markdown(elem_id="example-caption", visible=False)
                with gr.Tabs(elem_id="sections", overflow_behavior="wrap") as tabs:
                    components |= step_tab.build_tabs()
                    components |= lab_tab.build_tab()
                    dynamics = dynamics_tab.build_tab()
        with gr.Accordion("All numbers (JSON, as returned by the API) and downloads", open=False):
            components["summary"] = gr.JSON(label="summary")
            prepare = gr.Button("Prepare the gradients CSV and the JSON summary")
            files = gr.File(label="downloads", file_count="multiple", elem_id="downloads")
        with gr.Accordion("The code: rerun this step in a notebook", open=False):
            export_button = gr.Button("Export this step as a standalone script")
            script = gr.Code(language="python", label="script", elem_id="export-script")
            script_file = gr.File(label="script (.py)", elem_id="export-file")
        # The `step` API endpoint's own trigger: scripts call it, the page never clicks it.
        step_api = gr.Button(visible=False)

        inputs = [controls[name] for name in STEP_INPUTS]
        last_valid = gr.State(None)
        open_tab = gr.State(page_events.FIRST_TAB)
        drawn = gr.State({})  # tab -> the inputs its charts show
        notices_shown = gr.State([])  # the fields whose notice is on the page
        by_name = (
            {f"control:{name}": controls[name] for name in controls}
            | {f"notice:{name}": notices[name] for name in notices}
            | {name: components[name] for name in (*page_events.CHARTS, "summary")}
            | {name: components[name] for name in ("headline", "magnitudes", "magnitude_plot")}
            | extra
            | {"status": status, "last_valid": last_valid, "caption": caption, "reading": reading}
            | {"tabs": tabs, "tab": open_tab, "drawn": drawn, "notices_shown": notices_shown}
        )
        _wire_page(demo, inputs, by_name, components, example_buttons)

        step_api.click(
            run_step,
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
        # The URL names what the results show: it is written when a step answer changes the
        # last valid settings, or a training setting is committed (never per keystroke).
        written = [last_valid.change] + [
            trigger
            for name in ("steps", "mode", "period", "pure_rounding")
            for trigger in commit_triggers(dynamics[name])
        ]
        wire_url_state(demo, controls | dynamics, written)  # last: the step waits for the URL
    return demo


def _wire_page(
    demo: gr.Blocks,
    inputs: list[Any],
    by_name: dict[str, Any],
    components: dict[str, Any],
    example_buttons: list[gr.Button],
) -> None:
    """The page's private step events (see ``ui.page_events``): commit, then the open tab.

    Each event's outputs are the names ``page_events`` lists for it, and its progress shows on
    the headline only: the browser then marks and updates only what the event can change.
    """
    last, tab, shown = by_name["last_valid"], by_name["tab"], by_name["notices_shown"]
    lane = {"concurrency_limit": 1, "concurrency_id": "page-step", "api_visibility": "private"}

    def outputs(names: tuple[str, ...]) -> list[Any]:
        return [by_name[name] for name in names]

    def answer(updates: dict[str, Any]) -> Any:
        # An empty dict would be read as one value; a lone skip leaves every output as it is.
        return {by_name[name]: value for name, value in updates.items()} or gr.skip()

    def values_of(args: tuple) -> dict[str, Any]:
        return dict(zip(STEP_INPUTS, args, strict=False))

    def on_commit(*args: Any) -> Any:
        return answer(page_events.commit(values_of(args[:-2]), *args[-2:]))

    drawn = by_name["drawn"]

    def on_tab(last_value: Any, tab_value: Any, drawn_value: Any) -> Any:
        return answer(page_events.tab_charts(last_value, tab_value, drawn_value))

    def then_charts(event: Any) -> None:
        # The charts follow the results (the last valid inputs, a server-side state), so an
        # event that also sets inputs (an example, a preset) never races its own update.
        event.then(
            on_tab,
            [last, tab, drawn],
            outputs(page_events.TAB_OUTPUTS),
            show_progress="hidden",
            **lane,
        )

    # A slider's release is its own event, sent with the values at release ("multiple"):
    # deferred behind a running commit, like the other inputs' ("always_last"), it would read
    # the box after the slider clamped it, and N = 1e40 would run as 4096 with no notice.
    sliders = [component for component in inputs if isinstance(component, gr.Slider)]
    triggers = [demo.load]
    for component in inputs:
        triggers += [] if component in sliders else commit_triggers(component)
    once = {
        "trigger_mode": "always_last",
        "preprocess": False,
        "show_progress": "minimal",
        "show_progress_on": [components["headline"]],
    }
    commit_inputs, commit_outputs = [*inputs, last, shown], outputs(page_events.COMMIT_OUTPUTS)
    then_charts(gr.on(triggers, on_commit, commit_inputs, commit_outputs, **once, **lane))
    released = [slider.release for slider in sliders]
    each = once | {"trigger_mode": "multiple"}
    then_charts(gr.on(released, on_commit, commit_inputs, commit_outputs, **each, **lane))

    def scale_from(value: float, args: tuple) -> Any:
        values = values_of(args[:-2]) | {"loss_scale": value}
        return answer({"control:loss_scale": value} | page_events.commit(values, *args[-2:]))

    def on_exponent(exponent: Any, *args: Any) -> Any:
        return scale_from(2.0 ** int(exponent), args)

    def on_preset(label: Any, *args: Any) -> Any:
        return scale_from(preset_loss_scale(label), args)

    for control_name, trigger, handler, api_name in (
        ("loss_scale_exponent", "release", on_exponent, "preset_loss_scale_exponent"),
        ("loss_scale_presets", "input", on_preset, "preset_loss_scale"),
    ):
        source = by_name[control_name]
        event = getattr(source, trigger)(
            handler,
            [source, *inputs, last, shown],
            outputs(page_events.SCALE_OUTPUTS),
            api_name=api_name,
            **once,
            **lane,
        )
        then_charts(event)

    lesson_outputs = outputs(page_events.LESSON_OUTPUTS)
    for button, lesson in zip(example_buttons, LESSONS, strict=True):

        def on_lesson(last_value: Any, shown_value: Any, lesson=lesson) -> Any:
            return answer(page_events.run_lesson(lesson, last_value, shown_value))

        event = button.click(on_lesson, [last, shown], lesson_outputs, **once, **lane)
        then_charts(event.then(fn=None, js=_scroll_js(lesson.target)))

    def remember(selected: gr.SelectData) -> str:
        return selected.value

    then_charts(by_name["tabs"].select(remember, None, tab, show_progress="hidden", **lane))


def _scroll_js(element_id: str) -> str:
    """JS that scrolls the element with ``element_id`` to the top of the window."""
    return (
        f"() => {{ const e = document.getElementById({element_id!r});"
        " if (e) e.scrollIntoView({behavior: 'smooth', block: 'start'}); }"
    )


CSS = """
#headline table, #inspection table, #magnitudes table { display: block; overflow-x: auto; }
#headline td, #inspection td, #magnitudes td { white-space: nowrap; }
#headline p, #headline ul { margin-top: 4px; margin-bottom: 4px; }
#intro p { margin: 4px 0; }
#intro h1 { margin-bottom: 4px; }
#pytorch-line p { margin: 0; font-size: var(--text-sm); }
#examples button { flex: 1 1 200px; white-space: normal; }
#example-caption { border-left: 4px solid var(--color-accent); padding-left: 10px; }
.field-notice { color: var(--error-text-color); font-size: var(--text-sm); }
.field-notice p { margin: 0; }
.stale-banner { padding: 6px 10px; border-radius: 6px; border: 1px solid var(--error-border-color);
  background: var(--error-background-fill); color: var(--error-text-color); }
/* Results that no longer match the inputs stay readable but visibly dimmed. */
#results:has(.stale-banner) > :not(#status) { opacity: 0.45; }
@media (max-width: 720px) {
  #results { order: -1; }
  #headline th, #headline td, #magnitudes th, #magnitudes td { padding: 4px 6px; }
}
"""


# Gradio's slider commits its number box on leaving it (the "release" event) but not on Enter,
# and its track on pointer-up only: Enter leaves the box, and releasing an arrow (Home, End, ...)
# key on the track counts as a pointer-up, so every control commits from the keyboard too.
JS = """() => {
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (event.key === "Enter" && box.matches && box.matches(".commit-slider input[type=number]")) {
      box.blur();
    }
  }, true);
  // A slider moved with the keyboard commits when its key is released, as a drag does on
  // pointer-up (Gradio's "release" listens to pointerup only).
  const moves = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp",
                 "PageDown"];
  document.addEventListener("keyup", (event) => {
    const track = event.target;
    if (moves.includes(event.key) && track.matches &&
        track.matches(".commit-slider input[type=range]")) {
      track.dispatchEvent(new PointerEvent("pointerup", {bubbles: true}));
    }
  }, true);
}"""


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
        "js": JS,
        "app_kwargs": {"middleware": [Middleware(HeavyRunMiddleware, api_names=lambda: api_names)]},
    }


def queue_kwargs() -> dict[str, Any]:
    """One run at a time per event (the sweep and the training share one heavy lane).

    The queue's bound is generous because no visitor can hold more than one heavy place in it
    (``ui.public``): it only stops a crowd, never one visitor's flood.
    """
    return {"max_size": 256, "default_concurrency_limit": 1}
