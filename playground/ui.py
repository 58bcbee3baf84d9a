"""The Gradio page: controls -> StepConfig -> run_report -> summary and figures.

Rule: this module only lays out components and wires events. Handlers are plain functions
defined outside the Blocks so tests call them directly; every limit comes from the settings
tables (StepConfig's, and dynamics.RUN_SETTINGS); every number shown comes from a report.
The main event, ``step``, serves the page and the API; it runs at page load and whenever an
input changes, and only the latest change is run (``trigger_mode="always_last"``), so dragging
a slider never queues stale work. The heavier ``sweep`` and ``dynamics`` run on a button.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Iterator
from typing import Any

import gradio as gr
from gradio.components.plot import PlotData

from playground.charts import DYNAMICS_FIGURES, all_figures, sweep_figure
from playground.config import ConfigError, StepConfig, defaults, settings
from playground.dynamics import DEFAULT_PERIOD, RUN_SETTINGS, run_dynamics
from playground.precision import PRESETS, inspect_number
from playground.report import StepReport, run_report
from playground.summary import (
    dynamics_summary,
    summarize,
    sweep_summary,
)
from playground.sweep import run_sweep

TITLE = "Mixed-Precision Step Playground"
DEFAULTS = defaults()
LOSS_SCALE_PRESETS = {
    "2^0 = 1": 1.0,
    "2^8": 2.0**8,
    "2^10": 2.0**10,
    "2^15": 2.0**15,
    "2^24": 2.0**24,
}
# Inputs of the `step` event, in API order: the six a caller most often sets come first; every
# input has the page's default, so a call may stop after any of them.
INPUT_ORDER = (
    "model_seed",
    "n",
    "d_in",
    "d_out",
    "lr",
    "loss_scale",
    "data_seed",
    "input_scale",
    "target_scale",
    "compute_dtype",
)
FIGURE_LABELS = (  # the order of charts.FIGURES
    "Loss before and after",
    "Gradient histograms",
    "Mixed vs float32 gradient entries",
    "Relative gradient error",
    "Update sizes",
    "Gradient magnitudes against the dtype's ranges",
)
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

DYNAMICS_LABELS = ("Loss over the steps", "Lost-update meter", "Loss scale over the steps")
DYNAMICS_INTRO = """
### Many steps: float32, mixed (float32 master weights) and pure low precision
Trains three copies of the layer on the same batch, with the learning rate, loss scale and
compute dtype above: plain float32; the mixed step repeated (low-precision compute, float32
master weights); and parameters stored in the low-precision dtype itself. The lost-update meter
counts parameter entries whose update was too small to change the stored value. *Dynamic*
scaling grows the scale after a run of finite steps and halves it, skipping the update, when a
gradient overflows.
"""
PRECISION_LAB = """
### Where the gradients land
Bars: the scaled gradients as the low-precision backward pass holds them. Outline: the same
gradients after dividing by the loss scale (in float32). Shaded: the compute dtype's ranges.
Anything left of the subnormal band is rounded to zero; anything right of the normal band
becomes infinite. Switch the compute dtype to float16 to see how much narrower its range is.
"""
SWEEP_INTRO = """
### Loss-scale sweep
Runs the mixed step at every power-of-two loss scale from 2^0 up to 2^16 for float16 (just past
its largest value) or 2^127 for bfloat16 (the largest power of two a float32 scale can hold), in
one compiled call, and compares each with float32. Green marks the scales whose gradients are
finite and within 2x of the best error the sweep finds.
"""
INSPECTOR_INTRO = """
### Precision inspector
Type a number to see how float32, bfloat16 and float16 store it: the sign, exponent and mantissa
bits, the value actually kept, the rounding error and the gap to the next representable value.
"""
INTRO = """
# Mixed-Precision Step Playground

One SGD step of a linear layer (`flax.nnx.Linear`), trained on a synthetic regression batch.
The **mixed** step keeps the parameters in float32 but runs the forward and backward pass on
copies rounded to a low-precision dtype: the loss is multiplied by a *loss scale* before
differentiation and the gradients are divided by it again before the update. Next to it runs
the **same step in float32**. Change any input and both steps are recomputed.
"""


@contextlib.contextmanager
def _core_errors() -> Iterator[None]:
    """Turn the core's ConfigError into gr.Error with the same message (field and range)."""
    try:
        yield
    except ConfigError as error:
        # A visitor's typo is not a server fault: no traceback in the Space's log.
        raise gr.Error(str(error), title=f"Invalid {error.field}", print_exception=False) from None


def _validated(*values: Any) -> StepConfig:
    """The config from the events' inputs (INPUT_ORDER); gr.Error with the core's message."""
    with _core_errors():
        return StepConfig(**dict(zip(INPUT_ORDER, values, strict=True)))


def _cell(value: float, digits: int = 7) -> str:
    return f"{value:.{digits}g}" if math.isfinite(value) else f"**{value}**"


def headline(report: StepReport, summary: dict[str, Any]) -> str:
    """The losses as a small Markdown table, then the summary's reading as bullets."""
    dtype = report.config.compute_dtype
    difference = report.mixed_new_loss - report.float32_new_loss
    reading = "\n".join(f"- {sentence}" for sentence in summary["reading"])
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
        f"The mixed step uses {dtype} compute and float32 master weights.\n\n"
        f"{reading}\n"
    )


def magnitude_table(summary: dict[str, Any]) -> str:
    """The summary's before/after-scaling counters as a Markdown table of shares."""
    counts = summary["magnitudes"]
    total = counts["entries"]["total"]
    dtype = summary["config"]["compute_dtype"]
    rows = [
        f"| {when} | " + " | ".join(f"{n / total:.1%} ({n:,})" for n in kinds.values()) + " |"
        for when, kinds in counts.items()
        if when != "entries"
    ]
    kinds = list(counts["before scaling"])
    header = "| | " + " | ".join(kinds) + " |\n" + "|---" * (len(kinds) + 1) + "|\n"
    return (
        f"Gradient entries in {dtype} ({total:,} in all), by where they land:\n\n"
        + header
        + "\n".join(rows)
        + "\n"
    )


def _plot(figure: dict[str, Any]) -> PlotData:
    # gr.Plot accepts its own PlotData: a Plotly JSON string, sent as is to Plotly.js.
    return PlotData(type="plotly", plot=json.dumps(figure))


def run_step(
    seed: Any,
    n: Any,
    d_in: Any,
    d_out: Any,
    lr: Any,
    loss_scale: Any,
    data_seed: Any = DEFAULTS["data_seed"],
    input_scale: Any = DEFAULTS["input_scale"],
    target_scale: Any = DEFAULTS["target_scale"],
    compute_dtype: Any = DEFAULTS["compute_dtype"],
) -> tuple[Any, ...]:
    """The ``step`` endpoint: (headline Markdown, JSON summary, magnitude counters, figures...).

    Raises gr.Error with the core's message (field and allowed range) on invalid input.
    """
    config = _validated(
        seed, n, d_in, d_out, lr, loss_scale, data_seed, input_scale, target_scale, compute_dtype
    )
    report = run_report(config)
    figures = (_plot(figure) for figure in all_figures(report))
    summary = summarize(report)
    return (headline(report, summary), summary, magnitude_table(summary), *figures)


def run_sweep_event(*values: Any) -> tuple[Any, ...]:
    """The ``sweep`` endpoint (same inputs as ``step``): (reading Markdown, JSON, figure)."""
    config = _validated(*values)
    sweep = run_sweep(config)
    summary = sweep_summary(sweep)
    reading = "\n".join(f"- {sentence}" for sentence in summary["reading"])
    return reading, summary, _plot(sweep_figure(sweep))


def run_dynamics_event(*values: Any) -> tuple[Any, ...]:
    """The ``dynamics`` endpoint: the step inputs, then steps, scaling mode and growth period.

    Returns (reading Markdown, JSON summary, loss curves, lost-update meter, scale figure).
    """
    config = _validated(*values[: len(INPUT_ORDER)])
    steps, mode, period = values[len(INPUT_ORDER) :]
    with _core_errors():
        dynamics = run_dynamics(config, steps, mode, period)
    summary = dynamics_summary(dynamics)
    reading = "\n".join(f"- {sentence}" for sentence in summary["reading"])
    return (reading, summary, *(_plot(figure(dynamics)) for figure in DYNAMICS_FIGURES))


def inspect_event(value: Any) -> str:
    """The ``inspect`` endpoint: how a number is stored in float32, bfloat16 and float16."""
    try:
        number = float(value) if isinstance(value, (int, float)) and value is not True else None
    except OverflowError:  # an int beyond float range, which JSON can carry
        number = None
    if value is False or number is None or math.isnan(number):
        raise gr.Error(
            f"number must be a real number within float range; got {value!r}",
            title="Invalid number",
            print_exception=False,
        )
    views = inspect_number(number)
    # One column per dtype and one row per property: four columns stay readable on a phone.
    fields = (
        ("stored value", lambda v: f"{v.stored:.9g}"),
        ("kind", lambda v: v.category),
        ("sign bit", lambda v: f"`{v.sign_bit}`"),
        ("exponent bits", lambda v: f"`{v.exponent_bits}`"),
        ("mantissa bits", lambda v: f"`{v.mantissa_bits}`"),
        ("rounding error", lambda v: f"{v.rounding_error:.3g}"),
        ("relative error", lambda v: f"{v.relative_error:.3g}"),
        ("gap to next value", lambda v: f"{v.gap_to_next:.3g}"),
    )
    header = "| | " + " | ".join(v.dtype for v in views) + " |"
    rule = "|---" * (len(views) + 1) + "|"
    rows = [f"| {name} | " + " | ".join(show(v) for v in views) + " |" for name, show in fields]
    return f"Typed: **{number!r}**\n\n" + "\n".join([header, rule, *rows]) + "\n"


def preset_number(label: str) -> float:
    """The number of an inspector preset label."""
    return dict(PRESETS)[label]


def preset_loss_scale(label: str) -> float:
    """The loss scale of a preset label."""
    return LOSS_SCALE_PRESETS[label]


def ping() -> str:
    """A trivial endpoint on the same server, the baseline of bench/bench_app.py."""
    return "pong"


def _control(name: str) -> gr.components.Component:
    """One input component, with its range and help text read from the settings table."""
    bounds = settings()[name]
    value = DEFAULTS[name]
    info = f"{bounds.help} Allowed: {bounds.describe()}."
    label = f"{bounds.label} ({name})"
    if bounds.choices:
        return gr.Radio(list(bounds.choices), value=value, label=label, info=bounds.help)
    if name in ("n", "d_in", "d_out"):
        return gr.Slider(bounds.low, bounds.high, value=value, step=1, label=label, info=info)
    return gr.Number(value=value, label=label, info=info, precision=0 if bounds.integer else None)


def _plot_slot(label: str) -> gr.Plot:
    # The figure carries its own title, so the component label is kept for screen readers only.
    return gr.Plot(label=label, show_label=False)


def build_demo() -> gr.Blocks:
    """The page, top to bottom: intro, controls, losses and reading, charts, raw JSON."""
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(INTRO)
        with gr.Row(equal_height=False):
            with gr.Column(scale=1, min_width=280):
                controls = {name: None for name in INPUT_ORDER}
                with gr.Group():
                    controls["model_seed"] = _control("model_seed")
                    controls["data_seed"] = _control("data_seed")
                for name in ("n", "d_in", "d_out", "lr"):
                    controls[name] = _control(name)
                presets = gr.Radio(list(LOSS_SCALE_PRESETS), label="loss scale presets", value=None)
                controls["loss_scale"] = _control("loss_scale")
                controls["compute_dtype"] = _control("compute_dtype")
                with gr.Accordion("Data magnitudes", open=False):
                    controls["input_scale"] = _control("input_scale")
                    controls["target_scale"] = _control("target_scale")
            with gr.Column(scale=2, min_width=320):
                inputs = [controls[name] for name in INPUT_ORDER]
                gr.Examples(
                    examples=[
                        [{**DEFAULTS, **overrides}[name] for name in INPUT_ORDER]
                        for _, overrides in EXAMPLES
                    ],
                    example_labels=[label for label, _ in EXAMPLES],
                    inputs=inputs,
                    label="Examples that each teach something",
                )
                losses = gr.Markdown(elem_id="headline", label="losses")
                plots = [_plot_slot(FIGURE_LABELS[0])]
        with gr.Tabs():
            with gr.Tab("Gradient histograms"):
                plots.append(_plot_slot(FIGURE_LABELS[1]))
            with gr.Tab("Float32 comparison"):
                plots.append(_plot_slot(FIGURE_LABELS[2]))
                plots.append(_plot_slot(FIGURE_LABELS[3]))
            with gr.Tab("Update sizes"):
                plots.append(_plot_slot(FIGURE_LABELS[4]))
            with gr.Tab("Precision lab"):
                gr.Markdown(PRECISION_LAB)
                magnitudes = gr.Markdown(elem_id="magnitudes")
                plots.append(_plot_slot(FIGURE_LABELS[5]))
                gr.Markdown(SWEEP_INTRO)
                sweep_button = gr.Button("Sweep the loss scale", variant="primary")
                sweep_reading = gr.Markdown(elem_id="sweep-reading")
                sweep_plot = _plot_slot("Loss-scale sweep")
                with gr.Accordion("Sweep numbers (JSON)", open=False):
                    sweep_json = gr.JSON(label="sweep")
                gr.Markdown(INSPECTOR_INTRO)
                with gr.Row():
                    number = gr.Number(value=1 + 1e-4, label="a number", elem_id="inspect-number")
                    number_presets = gr.Dropdown(
                        [label for label, _ in PRESETS], label="examples", value=None
                    )
                inspection = gr.Markdown(elem_id="inspection")
            with gr.Tab("Training dynamics"):
                gr.Markdown(DYNAMICS_INTRO)
                with gr.Row():
                    limits = RUN_SETTINGS
                    steps = gr.Slider(
                        limits["steps"].low,
                        limits["steps"].high,
                        value=200,
                        step=1,
                        label=f"{limits['steps'].label} (steps)",
                        info=limits["steps"].help,
                    )
                    mode = gr.Radio(
                        list(limits["mode"].choices),
                        value="static",
                        label=f"{limits['mode'].label} (mode)",
                        info="none: S = 1; static: the loss scale above; dynamic: starts there.",
                    )
                    period = gr.Number(
                        value=100,
                        precision=0,
                        label=f"{limits['period'].label} (period)",
                        info=f"PyTorch's GradScaler and jmp default to {DEFAULT_PERIOD}; "
                        "a shorter period shows the growth within a short run.",
                    )
                train_button = gr.Button("Train the three runs", variant="primary")
                dynamics_reading = gr.Markdown(elem_id="dynamics-reading")
                dynamics_plots = [_plot_slot(label) for label in DYNAMICS_LABELS]
                with gr.Accordion("Training numbers (JSON)", open=False):
                    dynamics_json = gr.JSON(label="dynamics")
        with gr.Accordion("All numbers (JSON, as returned by the API)", open=False):
            summary = gr.JSON(label="summary")

        presets.input(preset_loss_scale, presets, controls["loss_scale"], api_visibility="private")
        gr.on(
            triggers=[demo.load] + [component.change for component in inputs],
            fn=run_step,
            inputs=inputs,
            outputs=[losses, summary, magnitudes, *plots],
            api_name="step",
            trigger_mode="always_last",
            preprocess=False,  # StepConfig checks every value and names the field on error
            concurrency_limit=1,
        )
        sweep_button.click(
            run_sweep_event,
            inputs=inputs,
            outputs=[sweep_reading, sweep_json, sweep_plot],
            api_name="sweep",
            preprocess=False,
            concurrency_limit=1,
            show_progress="full",
        )
        train_button.click(
            run_dynamics_event,
            inputs=[*inputs, steps, mode, period],
            outputs=[dynamics_reading, dynamics_json, *dynamics_plots],
            api_name="dynamics",
            preprocess=False,
            concurrency_limit=1,
            show_progress="full",
        )
        number_presets.input(preset_number, number_presets, number, api_visibility="private")
        gr.on(
            triggers=[demo.load, number.change],
            fn=inspect_event,
            inputs=number,
            outputs=inspection,
            api_name="inspect",
            preprocess=False,
            trigger_mode="always_last",
        )
        gr.api(ping, api_name="ping")
    return demo


# Wide tables scroll inside their box instead of breaking numbers mid-digit on a phone.
CSS = """
#headline table, #inspection table, #magnitudes table { display: block; overflow-x: auto; }
#headline td, #inspection td, #magnitudes td { white-space: nowrap; }
@media (max-width: 480px) {
  #headline th, #headline td, #magnitudes th, #magnitudes td { padding: 4px 6px; }
}
"""


def launch_kwargs() -> dict[str, Any]:
    """Options for ``demo.launch``: a public Space that shares nothing but this page."""
    return {
        "share": False,
        "show_error": True,
        "max_threads": 8,
        "footer_links": ["api", "gradio"],
        "theme": gr.themes.Soft(),
        "css": CSS,
    }


def queue_kwargs() -> dict[str, Any]:
    """Bounded queue: one run at a time per event, at most 32 waiting visitors."""
    return {"max_size": 32, "default_concurrency_limit": 1}
