"""The Training dynamics tab on the page: the run's own controls, the train button, pinned runs,
the stale banner, and the ``dynamics`` endpoint (a heavy run).

Rule: the endpoint takes every settings field (``arguments.DYNAMICS``: the step's, then the
run's ``steps``, ``mode`` and ``period`` in the table's order, each named as in the table),
trains with the core and hands the run to the section (``sections.dynamics.tab``), whose figure
dicts become gr.Plot values here (``widgets.as_plot``). ``build`` lays out the components under
the outputs' names.

The page adds, in private events (the endpoint's inputs and outputs stay as they are):
    after a run  its curves (``RunCurves``, kept by the endpoint in a small cache keyed by the
                 run's settings, as its JSON summary names them, and the upload) become the
                 session's ``shown_run``; the charts are redrawn with the session's pins
                 overlaid, the notes name where a curve stopped being finite, and the stale
                 banner shows only if a control changed during the run
    pin / clear  ``Pin this run`` adds the shown run to the session's pins (at most
                 ``pins.MAX_PINS``, oldest dropped); ``Clear pins`` empties them and redraws
    stale        whenever a control commits (or the step's results change), the controls'
                 settings are compared with the shown run's; a difference shows the banner
                 (``sections.dynamics.stale``) and the results' column dims (``ui.assets``)
    progress     a run's progress (its place in the queue, then its time) shows in its own box
                 under the buttons (``#dynamics-progress``), Gradio's own display, and so does a
                 refusal's status: the shown run's charts, reading and notes are never covered,
                 so a refused run leaves them in place (stale under the banner when the controls
                 changed) and its message appears once, in Gradio's error pop-up
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import ConfigError, StepConfig, check_setting, settings
from playground.sections.dynamics import tab as dynamics_tab
from playground.sections.dynamics.curves import RunCurves, curves_of, settings_text
from playground.sections.dynamics.pins import pinned
from playground.sections.dynamics.stale import TRAIN_WORDS, stale_banner
from playground.ui.arguments import DYNAMICS, core_errors, validated, validated_data
from playground.ui.components import Page, StaleCheck
from playground.ui.downloads_input import ask_js, checkbox, page_inputs, with_downloads
from playground.ui.examples import TrainingLessons, build_training_lessons
from playground.ui.fair_use import admit, frees_heavy_place
from playground.ui.uploads import upload_key
from playground.ui.widgets import (
    DEFAULTS,
    as_plot,
    commit_triggers,
    control,
    plot_slot,
    plotted,
    quiet_progress,
    session_state,
)

TAB_LABEL = "Training dynamics"
# The run's own settings, shown in this tab.
RUN_FIELDS = ("steps", "mode", "period", "pure_rounding")
# Curves of the latest runs, by (the run's config, upload path): the page's event after a run
# finds them by the config its JSON summary shows.
RECENT_RUNS = 16
_recent: collections.OrderedDict[tuple, RunCurves] = collections.OrderedDict()
_lock = threading.Lock()


def _run_key(config: StepConfig, data_payload: Any) -> tuple:
    upload = upload_key(data_payload)
    return config, upload[0] if upload else None


def _dynamics(values: dict[str, Any], files: bool) -> dynamics_tab.DynamicsViews:
    """The ``dynamics`` endpoint: the step inputs, then steps, scaling mode and growth period,
    then ``downloads`` (the run's CSV and JSON files, None unless asked for)."""
    config = validated(values)
    data = validated_data(values, config)
    with core_errors():
        dynamics = run_dynamics(config, data=data)
    with _lock:
        _recent[_run_key(dynamics.config, values.get("data"))] = curves_of(
            dynamics, data.name if data else None
        )
        while len(_recent) > RECENT_RUNS:
            _recent.popitem(last=False)
    views = dynamics_tab.dynamics_views(dynamics, files=files)
    return plotted(views, dynamics_tab.PLOT_LABELS)


dynamics_endpoint = with_downloads(DYNAMICS, _dynamics)
run_dynamics_event = frees_heavy_place(dynamics_endpoint)


def recent_run(summary: Any, data_payload: Any) -> RunCurves | None:
    """The curves of the run whose JSON ``summary`` the page shows, if still kept."""
    try:
        config = StepConfig(**summary["config"])
    except (ConfigError, KeyError, TypeError):
        return None
    with _lock:
        return _recent.get(_run_key(config, data_payload))


def controls_settings(values: dict[str, Any]) -> dict[str, str]:
    """What the controls say, as the shown run's settings are written (a value the field
    refuses is written as typed)."""
    checked = {}
    for name, bounds in settings().items():
        try:
            checked[name] = check_setting(name, values.get(name, DEFAULTS[name]), bounds)
        except ConfigError:
            checked[name] = values.get(name)
    upload = upload_key(values.get("data"))
    return settings_text(checked, upload[1] if upload else None)


@dataclass
class DynamicsTab:
    """The Training dynamics tab's components, by the names of the outputs they show."""

    controls: dict[str, gr.components.Component]  # the run's own settings, by field name
    train_button: gr.Button
    pin_button: gr.Button
    clear_pins: gr.Button
    dynamics_status: gr.Markdown
    dynamics_reading: gr.Markdown
    dynamics_notes: gr.Markdown
    dynamics_charts: gr.Column
    loss_curves: gr.Plot
    lost_updates: gr.Plot
    scale_curve: gr.Plot
    dynamics_json: gr.JSON
    dynamics_files: gr.File
    dynamics_downloads: gr.Checkbox
    shown_run: gr.State  # the RunCurves the charts show, None before a run
    pins: gr.State  # this session's pinned RunCurves, oldest first
    run_progress: gr.Markdown  # where a run's progress and a refusal's status show
    lessons: TrainingLessons | None = None  # the training lessons' buttons (ui.examples)

    @property
    def charts(self) -> dict[str, gr.Plot]:
        """No chart of the step's report: this tab's charts come from its own run."""
        return {}


def build() -> DynamicsTab:
    """The Training dynamics tab (call inside ``gr.Tabs``)."""
    with gr.Tab(TAB_LABEL, id=TAB_LABEL):  # its id, so a lesson can select it
        gr.Markdown(dynamics_tab.INTRO)
        lessons = build_training_lessons()
        with gr.Row():
            controls = {name: control(name) for name in RUN_FIELDS}
        with gr.Row():
            train_button = gr.Button(TRAIN_WORDS, variant="primary", scale=2)
            pin_button = gr.Button("Pin this run", elem_id="pin-run", scale=1)
            clear_pins = gr.Button("Clear pins", elem_id="clear-pins", scale=1)
        progress = gr.Markdown(min_height=40, elem_id="dynamics-progress")
        gr.Markdown(dynamics_tab.PIN_HELP, elem_classes=["pin-help"])
        # Everything a run shows sits in one column: a stale banner in it dims the rest.
        with gr.Column(elem_id="dynamics-results"):
            status = gr.Markdown(visible=False, elem_id="dynamics-status")
            reading = gr.Markdown(elem_id="dynamics-reading")
            notes = gr.Markdown(elem_id="dynamics-notes")
            # No empty chart boxes before the first run: they appear once it has drawn them.
            with gr.Column(visible=False) as charts:
                plots = {name: plot_slot(label) for name, label in dynamics_tab.PLOT_LABELS.items()}
        with gr.Accordion("Training numbers (JSON, CSV)", open=False):
            summary = gr.JSON(label="dynamics")
            files = gr.File(label="training downloads", file_count="multiple")
            downloads = checkbox()
        # Inside the tab: a child of gr.Tabs that is no Tab shifts the later tabs' order, and
        # the browser then lists a later tab twice once it is opened.
        shown_run, pins = session_state(None), session_state(())
    return DynamicsTab(
        controls,
        train_button,
        pin_button,
        clear_pins,
        status,
        reading,
        notes,
        charts,
        **plots,
        dynamics_json=summary,
        dynamics_files=files,
        dynamics_downloads=downloads,
        shown_run=shown_run,
        pins=pins,
        run_progress=progress,
        lessons=lessons,
    )


def show_charts() -> gr.Column:
    """The charts' column made visible (after a run drew them); no output of the API."""
    return gr.Column(visible=True)


def _figures(current: RunCurves, pins: tuple) -> list[Any]:
    return [as_plot(figure) for figure in dynamics_tab.pinned_figures(current, pins)]


def after_run(values: dict[str, Any], summary: Any, pins: tuple) -> list[Any]:
    """The page's answer to a finished run (its JSON ``summary``; the controls' ``values``
    now): the charts' column shown, the run's curves kept as the shown run, its notes, the
    stale banner (only if a control changed during the run), and the charts with the pins
    overlaid (skipped when no pin is kept, as the endpoint drew them)."""
    current = recent_run(summary, values.get("data"))
    if current is None:  # pushed out of the cache by other runs: keep what the endpoint drew
        return [show_charts(), *[gr.skip()] * 6]
    figures = _figures(current, pins) if pins else [gr.skip()] * 3
    notes = dynamics_tab.run_notes(current, pins)
    return [show_charts(), current, notes, stale_status(values, current), *figures]


def pin_run(current: RunCurves | None, pins: tuple) -> tuple[tuple, str]:
    """The pins with the shown run added (see ``pins.pinned``), and the notes."""
    if current is None:
        return pins, f"Nothing to pin yet: press **{TRAIN_WORDS}** first."
    pins = pinned(pins, current)
    return pins, dynamics_tab.run_notes(current, pins)


def clear_run_pins(current: RunCurves | None) -> list[Any]:
    """No pins; the charts redrawn without them."""
    if current is None:
        return [(), "", *[gr.skip()] * 3]
    return [(), dynamics_tab.run_notes(current, ()), *_figures(current, ())]


def stale_status(values: dict[str, Any], current: RunCurves | None) -> Any:
    """The stale banner when the controls differ from the shown run's settings, else hidden."""
    banner = stale_banner(current.settings if current else None, controls_settings(values))
    return gr.update(value=banner, visible=bool(banner))


def wire(page: Page, tab: DynamicsTab) -> None:
    """The train button: every settings field, in the API's order (its own controls here).

    A successful run then shows the charts' column and the pins, in a private event of its own,
    so the ``dynamics`` endpoint's outputs stay the figures themselves. Pins and the stale
    check are private events too (see the module rule).
    """
    every = page.controls | tab.controls
    inputs = [*(every[name] for name in DYNAMICS.order)]
    figures = [tab.loss_curves, tab.lost_updates, tab.scale_curve]
    # Tracked on a State, not on the charts they answer (ui.widgets.quiet_progress).
    private = {"api_visibility": "private", "queue": False, **quiet_progress(tab.shown_run)}

    def on_run_end(*args: Any) -> list[Any]:
        return after_run(DYNAMICS.values(args[:-2]), *args[-2:])

    tab.train_button.click(
        run_dynamics_event,
        inputs=page_inputs(DYNAMICS, inputs, tab.dynamics_downloads),
        outputs=[getattr(tab, name) for name in dynamics_tab.DynamicsViews._fields],
        js=ask_js(DYNAMICS),  # the page shows the run's files: it asks for them
        api_name="dynamics",
        preprocess=False,
        concurrency_limit=1,
        concurrency_id="heavy",  # the sweep and the training run share one concurrency group
        show_progress="full",
        show_progress_on=[tab.run_progress],  # never over the shown run (module rule)
        validator=admit(dynamics_endpoint),
    ).success(
        on_run_end,
        inputs=[*inputs, tab.dynamics_json, tab.pins],
        outputs=[
            tab.dynamics_charts,
            tab.shown_run,
            tab.dynamics_notes,
            tab.dynamics_status,
            *figures,
        ],
        preprocess=False,
        **private,
    )
    tab.pin_button.click(
        pin_run, [tab.shown_run, tab.pins], [tab.pins, tab.dynamics_notes], **private
    )
    tab.clear_pins.click(
        clear_run_pins, [tab.shown_run], [tab.pins, tab.dynamics_notes, *figures], **private
    )

    # A commit of the tab's own controls checks the shown run against the controls (a commit
    # of the step's controls runs the same check in its answer: ``checks``).
    (check,) = checks(page, tab)
    gr.on(
        [trigger for component in tab.controls.values() for trigger in commit_triggers(component)],
        check.fn,
        list(check.inputs),
        list(check.outputs),
        preprocess=False,
        trigger_mode="always_last",
        **private,
    )


def _dynamics_inputs(page: Page, tab: DynamicsTab) -> list[Any]:
    every = page.controls | tab.controls
    return [every[name] for name in DYNAMICS.order]


def check_shown_run(*args: Any) -> Any:
    """The stale banner of the shown run (the last input) for the controls (the others).

    With no run shown no banner can be on view, so every commit before a first run answers a
    skip: an update would cost the server and the browser a component rebuild each."""
    if args[-1] is None:
        return gr.skip()
    return stale_status(DYNAMICS.values(args[:-1]), args[-1])


def checks(page: Page, tab: DynamicsTab) -> list[StaleCheck]:
    """The shown run's stale check, which every commit of the step's controls runs (an example,
    a preset and the URL commit them too)."""
    inputs = (*_dynamics_inputs(page, tab), tab.shown_run)
    return [StaleCheck(check_shown_run, inputs, (tab.dynamics_status,))]
