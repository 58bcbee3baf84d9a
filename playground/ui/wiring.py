"""The page's private step events (``ui.page_events``): commit, then the open tab's charts.

Rule: each event's outputs are the keys ``page_events`` lists for it, resolved by the Page
record, and the page's stale checks (``Page.with_checks``: each commit answers them too, no
event of their own), and its progress shows on the headline only: the browser then marks and
updates only what the event can change. Every event that reads the controls (a commit, the
loss-scale controls, a lesson, the route) gathers them in the browser into the page's one hidden
box first (``ui.gathered_inputs``): the server's event reads the box and the States. The first
commit is chained after the URL is read (``.then``), so the page's first numbers are the URL's
settings. An event that shows no progress tracks it on one State
(``ui.widgets.quiet_progress``): Gradio's front end keeps the loading status of every component
an event ever tracked (its outputs, unless ``show_progress_on`` names others) and sets each of
them again, with a walk of the page's layout tree, on every status change of any event, so each
output tracked costs every later commit.
"""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr

from playground.core.lessons import LESSONS
from playground.ui import page_events, route
from playground.ui.arguments import STEP
from playground.ui.assets import scroll_js
from playground.ui.components import Control, Key, Page, merged
from playground.ui.examples import wire_training_lessons
from playground.ui.fair_use import LANE_SLOTS
from playground.ui.widgets import commit_triggers, quiet_progress

# The page's step events share one concurrency group (a session's run one at a time, in the
# order sent: ``ui.session_order``); private, never part of the API.
LANE = {"concurrency_limit": LANE_SLOTS, "concurrency_id": "page-step", "api_visibility": "private"}


def preset_loss_scale(label: str) -> float:
    """The loss scale of a preset label."""
    return page_events.LOSS_SCALE_PRESETS[label]


def _answer(page: Page, updates: dict[Key, Any]) -> Any:
    """An event's answer by component; a lone skip when it changes nothing (an empty dict
    would be read as one value)."""
    return {page[key]: value for key, value in updates.items()} or gr.skip()


def wire_page_events(page: Page, url_read: Any) -> None:
    """Wire the commit, the loss-scale controls, the lessons and the tabs (see the rule)."""
    inputs = page.inputs(STEP.order)
    quiet = quiet_progress(page.drawn)  # a State the charts event reads: no entry of its own

    def outputs(keys: tuple[Key, ...]) -> list[Any]:
        return [page[key] for key in keys]

    def on_commit(*args: Any) -> Any:
        return _answer(page, page_events.commit(STEP.values(args[:-2]), *args[-2:]))

    def on_tab(last_value: Any, tab_value: Any, drawn_value: Any) -> Any:
        return _answer(page, page_events.tab_charts(last_value, tab_value, drawn_value))

    def then_charts(event: Any) -> None:
        # The charts follow the results (the last valid inputs, a server-side state), so an
        # event that also sets inputs (an example, a preset) never races its own update.
        event.then(
            on_tab,
            [page.last_valid, page.open_tab, page.drawn],
            outputs(page_events.TAB_OUTPUTS),
            **quiet,
            **LANE,
        )

    # A slider's release is its own event, sent with the values at release ("multiple"):
    # deferred behind a running commit, like the other inputs' ("always_last"), it would read
    # the box after the slider clamped it, and N = 1e40 would run as 4096 with no notice.
    sliders = [component for component in inputs if isinstance(component, gr.Slider)]
    triggers = [
        trigger
        for component in inputs
        if component not in sliders
        for trigger in commit_triggers(component)
    ]
    once = {
        "trigger_mode": "always_last",
        "preprocess": False,
        "show_progress": "minimal",
        "show_progress_on": [page.headline],
    }
    commit_inputs = [*inputs, page.last_valid, page.notices_shown]
    commit = page.gathering(on_commit, commit_inputs, outputs(page_events.COMMIT_OUTPUTS))
    then_charts(commit.after(url_read.then, **once, **LANE))
    then_charts(commit.after(functools.partial(gr.on, triggers), **once, **LANE))
    released = [slider.release for slider in sliders]
    each = once | {"trigger_mode": "multiple"}
    then_charts(
        commit.after(functools.partial(gr.on, released, trigger_mode="multiple"), **each, **LANE)
    )
    _wire_loss_scale(page, inputs, once, then_charts)
    _wire_lessons(page, once, then_charts)

    def remember(selected: gr.SelectData) -> str:
        return selected.value

    then_charts(page.tabs.select(remember, None, page.open_tab, **quiet, **LANE))


def _wire_loss_scale(page: Page, inputs: list[Any], once: dict, then_charts: Any) -> None:
    """The power-of-two control and the presets: each sets the loss scale and commits."""

    def scale_from(value: float, args: tuple) -> Any:
        values = STEP.values(args[:-2]) | {"loss_scale": value}
        answer = merged({Control("loss_scale"): value}, page_events.commit(values, *args[-2:]))
        return _answer(page, answer)

    def on_exponent(exponent: Any, *args: Any) -> Any:
        return scale_from(2.0 ** int(exponent), args)

    def on_preset(label: Any, *args: Any) -> Any:
        return scale_from(preset_loss_scale(label), args)

    scale_outputs = [page[key] for key in page_events.SCALE_OUTPUTS]
    for source, trigger, handler, api_name in (
        (page.loss_scale_exponent, "release", on_exponent, "preset_loss_scale_exponent"),
        (page.loss_scale_presets, "input", on_preset, "preset_loss_scale"),
    ):
        event = page.gathering(
            handler, [source, *inputs, page.last_valid, page.notices_shown], scale_outputs
        )
        then_charts(event.after(getattr(source, trigger), api_name=api_name, **once, **LANE))


def _wire_lessons(page: Page, once: dict, then_charts: Any) -> None:
    """Each lesson button: its settings at once, one run, its caption, then scroll to it."""
    lesson_outputs = [page[key] for key in page_events.LESSON_OUTPUTS]
    for lesson_id, button in page.example_buttons.items():
        lesson = LESSONS[lesson_id]

        def on_lesson(last_value: Any, shown_value: Any, lesson=lesson) -> Any:
            return _answer(page, page_events.run_lesson(lesson, last_value, shown_value))

        checked = page.gathering(on_lesson, [page.last_valid, page.notices_shown], lesson_outputs)
        event = checked.after(button.click, **once, **LANE)
        then_charts(event.then(fn=None, js=scroll_js(lesson.target)))
    # The route's previous / next (``ui.route``).
    route.wire(
        page.route,
        page,
        page_events.run_lesson,
        lesson_outputs,
        once | LANE,
        then_charts,
    )
    # The training lessons' buttons, in the Training dynamics tab (``ui.examples``).
    dynamics = page.sections["dynamics"]
    wire_training_lessons(
        page, dynamics, page_events.run_lesson, lesson_outputs, once | LANE, then_charts
    )
