"""The page's API endpoints for one step: ``step``, ``downloads``, ``export`` and ``ping``.

Rule: each endpoint takes ``arguments.STEP``'s inputs (``export`` then the training run's and
the framework, appended: ``EXPORT``), validates them with the core (gr.Error
naming the field and its range on a bad one), and returns a NamedTuple whose field order is the
API's output order; the page wires components to outputs by those names. The sections' plain
values become Gradio's here: each figure dict a gr.Plot value (``widgets.as_plot``).
"""

from __future__ import annotations

import copy
import functools
from typing import Any, NamedTuple

import gradio as gr

from playground.core.data.user_data import UserData
from playground.core.settings.block_settings import FIELDS as BLOCK_FIELDS
from playground.core.settings.cost import check_downloads
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.lab import tab as lab_tab
from playground.sections.step import tab as step_tab
from playground.ui.arguments import STEP, Arguments, core_errors, validated, validated_data
from playground.ui.widgets import DEFAULTS, plotted
from playground.views import downloads, export

# Every chart the step event fills, by output name: its label (the step's charts, then the
# lab's two), in output order.
PLOT_LABELS = step_tab.PLOT_LABELS | {
    "magnitude_plot": lab_tab.MAGNITUDE_LABEL,
    "activation_plot": lab_tab.ACTIVATION_LABEL,
}
FIGURE_LABELS = tuple(PLOT_LABELS.values())


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


@STEP.handler
def run_step(values: dict[str, Any]) -> StepOutputs:
    """The ``step`` endpoint: (headline Markdown, JSON summary, magnitude counters, figures...).

    The answer to settings without an upload is kept (``STEP_ANSWERS`` of them): the step is a
    function of its settings alone, and a class of visitors sends the page's defaults again and
    again. Raises gr.Error with the core's message (field and allowed range) on invalid input.
    """
    config = validated(values)
    data = validated_data(values, config)
    if data is None:
        answer = _kept_answer(config)
        return answer._replace(summary=copy.deepcopy(answer.summary))
    return _answer(config, data)


def _answer(config: StepConfig, data: UserData | None) -> StepOutputs:
    report = run_report(config, data)
    views = step_tab.views(report, data.name if data else None)
    parts = views._asdict() | lab_tab.step_views(report)._asdict()
    return plotted(StepOutputs(**parts), PLOT_LABELS)


STEP_ANSWERS = 16


@functools.lru_cache(maxsize=STEP_ANSWERS)
def _kept_answer(config: StepConfig) -> StepOutputs:
    return _answer(config, None)


@STEP.handler
def run_downloads(values: dict[str, Any]) -> list[str]:
    """The ``downloads`` endpoint (same inputs as ``step``): the per-entry gradients as CSV and
    the JSON summary, as files. Its own event, so the step itself never writes files; a model
    too large for the CSV is refused before the step runs, and a full disk when it is written
    (its message names the cap)."""
    config = validated(values)
    with core_errors():
        check_downloads(config)
    data = validated_data(values, config)
    report = run_report(config, data)
    _, summary = step_tab.texts(report, data.name if data else None)
    try:
        return [downloads.gradients_csv(report), downloads.summary_json(summary, "summary")]
    except downloads.DiskFull as error:
        raise gr.Error(str(error), title="No room for downloads", print_exception=False) from None


class ExportOutputs(NamedTuple):
    """The ``export`` endpoint's outputs: the script's text and the same as a .py file."""

    script: str
    script_file: str


# The training run's settings, as /dynamics names them, then the script's framework.
EXPORT_RUN_FIELDS = ("steps", "mode", "period", "pure_rounding")
# /export's inputs: the step's, then (appended, with defaults, so older positional calls keep
# their meaning) the training run's settings and the framework.
EXPORT = Arguments(
    STEP.fields,
    appended=(
        *((name, DEFAULTS[name]) for name in EXPORT_RUN_FIELDS),
        ("framework", export.FRAMEWORKS[0]),
    ),
    # appended when the block-scaling settings were the last ones
    appended_after=BLOCK_FIELDS[-1],
)


@EXPORT.handler
def run_export(values: dict[str, Any]) -> ExportOutputs:
    """The ``export`` endpoint (the step's inputs, then ``steps``, ``mode``, ``period``,
    ``pure_rounding`` and ``framework``): a standalone script that reruns this step, its float32
    twin and the training run, with the upload embedded, and prints their losses as its last
    line of JSON: in JAX (jax, flax, optax and numpy only; the page's numbers bit for bit) or in
    PyTorch (autocast and GradScaler; within the compute dtype's precision)."""
    config = validated(values)
    data = validated_data(values, config)
    framework = values["framework"]
    with core_errors():
        script = export.export_script(config, data, framework)
    name = export.export_filename(config, framework)
    try:
        return ExportOutputs(script, downloads.text_file(script, name))
    except downloads.DiskFull as error:
        raise gr.Error(str(error), title="No room for downloads", print_exception=False) from None


def ping() -> str:
    """A trivial endpoint on the same server, the baseline of bench/bench_app.py."""
    return "pong"
