"""The page's own step events: run on commit, a message on a bad field, stale results marked.

Rules (the ``step`` API endpoint keeps its own contract: every output, gr.Error on bad input):
  commit    a number applies when committed (Enter or leaving the field), a slider when released,
            a choice when picked; an example, a loss-scale preset or the power-of-two control
            sets its inputs together and runs once.
  invalid   every field is checked on its own first, so each bad field gets the core's message
            (field and allowed values) in place of its control's help line, marked (the data
            upload's in the notice under it), and every other field's message clears.
            Nothing runs; the results stay, dimmed, under a banner that names the values they
            were computed with ("showing results for lr = 0.1"). No pop-up, so none pile up.
  visible   the first answer carries the text: the headline, the magnitude counts and the
            reading; the charts on view (the magnitude figure above the tabs and the open tab's)
            follow from the same report in a second answer, so the new loss is on the page
            before any chart is drawn (drawing a changed figure is the browser's slowest part),
            and another tab's charts are drawn when it opens. Reports are kept in a small cache
            keyed by the settings and the data, so those later answers never recompute the step.
  sync      the loss scale, its power-of-two exponent control and the presets always agree: the
            exponent shows round(log2 S), a preset is selected when S equals it.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from typing import Any

import gradio as gr

from playground.core.data.user_data import UserData
from playground.core.settings.settings import ConfigError, StepConfig, check_setting, settings
from playground.core.step.report import StepReport, run_report
from playground.sections.lab import tab as lab_tab
from playground.sections.lab.charts import magnitude_histogram
from playground.sections.step import tab as step_tab
from playground.sections.step.notes import NOTES, note_id
from playground.sections.step.operations import operations_markdown
from playground.ui.arguments import STEP
from playground.ui.components import Chart, Control, Key, Notice, merged
from playground.ui.examples import LESSONS, Lesson, caption_text
from playground.ui.sections import TAB_FIGURES
from playground.ui.uploads import user_data
from playground.ui.widgets import DEFAULTS, SLIDERS, as_plot, field_message
from playground.views.labels import control_label, labelled
from playground.views.numbers import json_number

INPUTS = STEP.order
SETTINGS = STEP.fields
LOSS_SCALE_PRESETS = {
    "2^0 = 1": 1.0,
    "2^8": 2.0**8,
    "2^10": 2.0**10,
    "2^15": 2.0**15,
    "2^24": 2.0**24,
}
FIRST_TAB = next(iter(TAB_FIGURES))
CHARTS = tuple(name for figures in TAB_FIGURES.values() for name in figures)
# The figure above the tabs, on view whichever tab is open.
ABOVE_TABS = "above the tabs"
FIGURE_ABOVE_TABS = {"magnitude_plot": magnitude_histogram}
# Each tab's note (what to notice, computed from the report), written with its charts.
TAB_NOTES = {tab: {note_id(tab): write} for tab, write in NOTES.items()}

# What each event may answer, by component name: an event's outputs are exactly these, so the
# browser and the server handle only what the event can change.
# Where a field's message shows: the data upload's notice, else the field's own control.
DATA = "data"
MESSAGES = tuple(Notice(name) if name == DATA else Control(name) for name in INPUTS)
COMMIT_OUTPUTS = (
    *MESSAGES,
    "notices_shown",
    "status",
    "last_valid",
    "headline",
    "reading",
    "operations",
    "summary",
    "magnitudes",
    "loss_scale_exponent",
    "loss_scale_presets",
    "caption",
)
LESSON_OUTPUTS = tuple(
    dict.fromkeys((*COMMIT_OUTPUTS, *(Control(name) for name in INPUTS), "tabs", "open_tab"))
)
NOTE_NAMES = tuple(name for notes in TAB_NOTES.values() for name in notes)
TAB_OUTPUTS = (*(Chart(name) for name in (*FIGURE_ABOVE_TABS, *CHARTS, *NOTE_NAMES)), "drawn")

# Reports by (config, data): up to MAX_REPORTS of them holding at most MAX_ENTRIES parameter
# entries together (one report of the largest model, about 2^20 entries, takes ~40 MB).
MAX_REPORTS = 8
MAX_ENTRIES = 2**21
_reports: OrderedDict[tuple, tuple[StepReport, UserData | None]] = OrderedDict()
_lock = threading.Lock()


def cached_report(config: StepConfig, data: UserData | None) -> StepReport:
    """``run_report(config, data)``, from the cache when the same settings and data ran."""
    key = (config, id(data))
    with _lock:
        hit = _reports.get(key)
        if hit is not None and hit[1] is data:
            _reports.move_to_end(key)
            return hit[0]
    report = run_report(config, data)
    with _lock:
        _reports[key] = (report, data)
        while len(_reports) > MAX_REPORTS or (
            len(_reports) > 1
            and sum(sum(p.size for p in r.params.values()) for r, _ in _reports.values())
            > MAX_ENTRIES
        ):
            _reports.popitem(last=False)
    return report


def field_problems(values: dict[str, Any]) -> dict[str, str]:
    """Field name -> the core's message, for every setting in ``values`` that is invalid on its
    own; then, if all are valid, the first cross-field or data problem."""
    table = settings()
    problems: dict[str, str] = {}
    for name in SETTINGS:
        try:
            check_setting(name, values[name], table[name])
        except ConfigError as error:
            problems[name] = str(error)
    if problems:
        return problems
    try:
        config = StepConfig(**{name: values[name] for name in SETTINGS})
        user_data(values.get("data"), config.d_out, config.task)
    except ConfigError as error:
        return {error.field if error.field in INPUTS else "data": str(error)}
    return {}


def _config_and_data(values: dict[str, Any]) -> tuple[StepConfig, UserData | None]:
    config = StepConfig(**{name: values[name] for name in SETTINGS})
    return config, user_data(values.get("data"), config.d_out, config.task)


def _shown(value: Any) -> str:
    if isinstance(value, float):
        return json_number(value) if not value.is_integer() or abs(value) >= 1e6 else f"{value:g}"
    return str(value)


def stale_banner(problems: dict[str, str], last: dict[str, Any] | None) -> str:
    """The banner over results that no longer match the inputs."""
    names = ", ".join(f"<em>{control_label(name)}</em>" for name in problems)
    if not last:
        return f"<div class='stale-banner'>Not computed: fix {names} (its message says why).</div>"
    held = labelled(last, [name for name in problems if name in last], _shown)
    shown = f"showing results for {held}" if held else "showing the last valid results"
    return (
        f"<div class='stale-banner'><strong>Not updated</strong>: fix {names} (its message says "
        f"why). Below, {shown}.</div>"
    )


def exponent_of(loss_scale: float) -> int:
    """The power-of-two control's value for a loss scale: round(log2 S)."""
    return round(math.log2(loss_scale))


def preset_of(loss_scale: float) -> str | None:
    """The preset label whose value is exactly ``loss_scale``, if any."""
    return next((label for label, v in LOSS_SCALE_PRESETS.items() if v == loss_scale), None)


def message(name: str, problem: str | None) -> dict[Key, Any]:
    """Field ``name``'s message (``problem``, or cleared when None), keyed where it shows."""
    if name == DATA:
        return {Notice(name): gr.update(value=problem or "", visible=problem is not None)}
    return {Control(name): field_message(name, problem)}


def commit(
    values: dict[str, Any], last: dict[str, Any] | None, shown: list[str] | None = None
) -> dict[Key, Any]:
    """The page's answer to committed inputs, keyed by component (see the module's rules).

    ``shown`` names the fields whose message is on the page. Keys (a subset of COMMIT_OUTPUTS):
    the message of every field that has a problem now or had one (``shown``: ``message``),
    ``notices_shown``, ``status`` (its banner of problems, hidden again only when ``shown``
    says the last answer showed one), ``last_valid``, and when valid the headline, ``reading``,
    ``operations`` (the operations table), ``summary``, ``magnitudes``,
    ``loss_scale_exponent`` and ``loss_scale_presets`` (the charts follow: ``tab_charts``).
    Never raises for a bad value.
    """
    problems = field_problems(values)
    # A slider clamps a refused value in its box (1e40 shows as 4096) after sending it; put
    # the value the results show back instead, and say so.
    back = {name: last[name] for name in problems if last and name in SLIDERS and name in last}
    for name, value in back.items():
        problems[name] = f"{problems[name]}. The slider is back at {value}, as in the results."
    messages = merged(
        *(
            message(name, problems.get(name))
            for name in INPUTS
            if name in problems or name in (shown or ())
        ),
        {Control(name): value for name, value in back.items()},
    )
    messages["notices_shown"] = sorted(problems)
    if problems:
        return messages | {"status": gr.update(value=stale_banner(problems, last), visible=True)}
    if shown:  # the last answer showed problems, and the banner naming them: hidden now
        messages["status"] = gr.update(value="", visible=False)
    config, data = _config_and_data(values)
    # An upload fixes N, D_in and D_out: the controls (and the results' settings) show them.
    shapes = data.shapes() if data else {}
    values = values | shapes
    report = cached_report(config, data)
    headline, reading, summary = step_tab.page_texts(report, data.name if data else None)
    return merged(
        messages,
        {Control(name): value for name, value in shapes.items()},
        {
            "caption": gr.update(visible=False),
            "last_valid": {name: values.get(name) for name in INPUTS},
            "headline": headline,
            "reading": reading,
            "operations": operations_markdown(report),
            "summary": summary,
            "magnitudes": lab_tab.magnitude_table(report),
            "loss_scale_exponent": exponent_of(config.loss_scale),
            "loss_scale_presets": preset_of(config.loss_scale),
        },
    )


def tab_charts(
    last: dict[str, Any] | None, tab: str | None, drawn: dict[str, str] | None
) -> dict[Key, Any]:
    """The charts on view for the last valid inputs ``last`` (what the results show): the figure
    above the tabs and the open ``tab``'s charts, each group unless it already shows them.
    ``drawn`` maps each group (a tab, or ABOVE_TABS) to the inputs its charts were drawn for,
    and comes back updated under the key ``drawn``."""
    tab = tab or FIRST_TAB
    groups = {ABOVE_TABS: FIGURE_ABOVE_TABS, tab: TAB_FIGURES.get(tab)}
    key = json.dumps(last, sort_keys=True, default=str)
    drawn = dict(drawn or {})
    stale = [group for group, figures in groups.items() if figures and drawn.get(group) != key]
    if not last or not stale:
        return {}
    report = cached_report(*_config_and_data(last))
    charts: dict[Key, Any] = {}
    for group in stale:
        drawn[group] = key
        charts |= {Chart(name): as_plot(draw(report)) for name, draw in groups[group].items()}
        charts |= {Chart(name): write(report) for name, write in TAB_NOTES.get(group, {}).items()}
    return charts | {"drawn": drawn}


def run_lesson(
    lesson: Lesson, last: dict[str, Any] | None, shown: list[str] | None = None
) -> dict[Key, Any]:
    """An example: all its settings at once (the rest at their defaults, no upload), one run,
    its caption, and its tab selected."""
    values = {name: DEFAULTS[name] for name in SETTINGS} | lesson.overrides | {"data": None}
    answer = commit(values, last, shown)
    report = cached_report(*_config_and_data(values))
    controls = {Control(name): values[name] for name in INPUTS}
    tabs = {"tabs": gr.Tabs(selected=lesson.tab), "open_tab": lesson.tab} if lesson.tab else {}
    caption = gr.update(value=caption_text(lesson, report), visible=True)
    return merged(answer, controls, tabs, {"caption": caption})


__all__ = ["LESSONS", "LOSS_SCALE_PRESETS", "commit", "run_lesson", "tab_charts"]
