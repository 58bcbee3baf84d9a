"""The page's private step events (``ui.page_events``): commit, then the open tab's charts.

Rule: each event's outputs are the keys ``page_events`` lists for it, resolved by the Page
record, and the page's stale checks (``Page.with_checks``: each commit answers them too, no
event of their own), and its progress shows on the headline only: the browser then marks and
updates only what the event can change. Every event that reads the controls (a commit, the
loss-scale controls, a lesson, the route) gathers them in the browser into the page's one hidden
box first (``ui.gathered_inputs``): the server's event reads the box and the States. The lesson
buttons with the route's previous / next / picker, the training lessons' buttons, and the
loss-scale controls are each one chain of events (``gr.on`` on every trigger), whose handlers
tell the trigger from the event's ``gr.EventData`` (``ui.examples``, ``ui.route``); a lesson's
or a chapter's run names what it points at in a hidden box, and the page's scroll, in the
browser, reads it. The first commit is chained after the URL is read (``.then``), so the page's
first numbers are the URL's settings. An event that shows no progress tracks it on one State
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
from playground.ui.assets import SCROLL_TO_NAMED_JS
from playground.ui.components import Control, Key, Page, merged
from playground.ui.examples import BY_CLICK, clicked, wire_training_lessons
from playground.ui.fair_use import LANE_SLOTS
from playground.ui.widgets import commit_triggers, quiet_progress, sender

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
    """The power-of-two control and the presets, one chain for both (``gr.on``): the one used
    (the event's ``gr.EventData`` target, by elem_id) sets the loss scale, and the step
    commits; each use runs (``examples.BY_CLICK``)."""
    exponent, presets = page.loss_scale_exponent, page.loss_scale_presets

    def on_loss_scale(power: Any, label: Any, *args: Any, event: gr.EventData) -> Any:
        used = sender(event)
        if used == exponent.elem_id:
            value = 2.0 ** int(power)
        elif used == presets.elem_id:
            value = preset_loss_scale(label)
        else:
            raise gr.Error(f"this event takes the loss-scale controls; got {used or 'none'}")
        values = STEP.values(args[:-2]) | {"loss_scale": value}
        answer = merged({Control("loss_scale"): value}, page_events.commit(values, *args[-2:]))
        return _answer(page, answer)

    scale_outputs = [page[key] for key in page_events.COMMIT_OUTPUTS]
    event = page.gathering(
        on_loss_scale,
        [exponent, presets, *inputs, page.last_valid, page.notices_shown],
        scale_outputs,
    )
    on_either = functools.partial(gr.on, [exponent.release, presets.input])
    then_charts(event.after(on_either, api_name="preset_loss_scale", **(once | LANE | BY_CLICK)))


def _wire_lessons(page: Page, once: dict, then_charts: Any) -> None:
    """The lesson buttons and the route's previous / next / picker, one chain for all
    (``ui.examples``' rule): the clicked lesson's settings at once, or the chapter's
    (``route.opener``), one run, then the page scrolls to what the lesson points at, or to the
    chapter's question (the run names it, ``{"elem_id": ...}``, in the hidden JSON box
    ``scroll_target``, which the browser's scroll reads; null when it opens nothing)."""
    lesson_outputs = [page[key] for key in page_events.LESSON_OUTPUTS]
    buttons = list(page.example_buttons.values())
    lessons = [LESSONS[lesson_id] for lesson_id in page.example_buttons]
    chapter = route.opener(page.route, page, page_events.run_lesson)

    def on_lesson(choice: Any, last_value: Any, shown_value: Any, event: gr.EventData) -> Any:
        trigger = sender(event)
        if trigger in route.STEPS:
            opened = chapter.answer(trigger, choice, last_value, shown_value)
            scroll = None if opened is None else {"elem_id": page.route.question.elem_id}
            return (opened or {}) | {page.scroll_target: gr.update(value=scroll)}
        lesson = clicked(event, lessons)
        answer = page_events.run_lesson(lesson, last_value, shown_value)
        return _answer(page, answer) | {page.scroll_target: {"elem_id": lesson.target}}

    checked = page.gathering(
        on_lesson,
        [page.route.select, page.last_valid, page.notices_shown],
        [*lesson_outputs, *chapter.outputs, page.scroll_target],
    )
    triggers = [button.click for button in buttons] + chapter.triggers
    event = checked.after(functools.partial(gr.on, triggers), **(once | LANE | BY_CLICK))
    # The charts and the scroll both follow the run: the charts' request leaves at once, not
    # after a step in the browser (a chapter's picture, drawn meanwhile, shares the CPU).
    then_charts(event)
    event.then(fn=None, inputs=[page.scroll_target], js=SCROLL_TO_NAMED_JS)
    # The route's instant answer in the browser, its claim and picture (``ui.route``).
    route.wire(page.route, page)
    # The training lessons' buttons, in the Training dynamics tab (``ui.examples``).
    dynamics = page.sections["dynamics"]
    wire_training_lessons(
        page, dynamics, page_events.run_lesson, lesson_outputs, once | LANE, then_charts
    )
