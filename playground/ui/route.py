"""The route ("Start here"): the lessons as one numbered sequence of chapters at the top of the
page, with previous / next, and the free exploration (every control, every tab) below it.

Rule: opening a chapter (``#route-next``, ``#route-prev``, or picking one in ``#route-select``;
the chapter opened is the one after, before, or picked, from the picker's value, which always
names the open chapter) does three things from the same click. In the browser, at once: the
buttons show their work (a spinner, "Opening the chapter ...") and the chapter's area says what
the chapter computes. On the server, the chapter's step: its lesson's settings applied as that
lesson's button applies them (every other setting back to its default, one step run, the
settings written to the URL; a training chapter also sets the Training dynamics tab's run
inputs), without switching the tab below, and where the learner is (``#route-counter``: chapter
k of n; ``#route-chapter``: the question), the page then bringing the chapter under the route's
buttons. And, in the ``heavy`` concurrency group, the chapter's checked claim (``#route-claim``)
beside the one picture that answers it (``#route-chart``), its payoff (``#route-payoff``,
``#route-payoff-chart``) under them; the buttons are done once these are drawn. The chapter's
runs are the page's own (the step report cache, the training lessons' runs), so a chapter
opened twice, or its lesson's button, never computes again. The chapter's step is a link of the
page's one chain of lesson events (``opener``, wired by ``ui.wiring`` with the lesson buttons);
the three triggers share one event for the claim and picture. Both read the trigger from the
event's ``gr.EventData`` (``step_of``); only the browser's instant answer is one per trigger.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.lessons import LESSONS, RUN_FIELDS, DynamicsLesson, StepLesson
from playground.core.lessons.route import ROUTE, reads
from playground.sections.route.view import chapter_view, counter, question_text
from playground.ui import examples
from playground.ui.assets import ROUTE_OPENED
from playground.ui.page_events import cached_report
from playground.ui.widgets import as_plot, quiet_progress, sender

NOT_STARTED = -1  # the chapter "opened" before the first, or by a cleared picker
START_LABEL = f"Start here: chapter 1 of {len(ROUTE)}, {ROUTE[0].title.lower()}"
BLURB = (
    f"## Start here\n{len(ROUTE)} short chapters: a question, a run, its picture, a checked claim."
)
CHOICES = [f"{number}. {chapter.title}" for number, chapter in enumerate(ROUTE, 1)]
# The class the route's buttons wear while a chapter opens (a spinner and "Opening ...": the
# page's CSS): put on as the click lands, with the chapter's area saying what it computes
# (``OPENING_JS``, in the browser: no wait for the server), and taken off once the chapter's
# claim and picture are drawn (``OPENED_JS``).
BUSY_CLASS = "route-busy"
_BUTTONS = "document.querySelectorAll('#route-next, #route-prev')"
OPENED_JS = (
    f"() => {{ {_BUTTONS}.forEach(b => {{ b.classList.remove('{BUSY_CLASS}');"
    " b.removeAttribute('aria-busy'); }); }"
)


# The chapter each trigger opens, by its elem_id: the next, the previous, the one picked.
STEPS: dict[str, int | None] = {"route-next": 1, "route-prev": -1, "route-select": None}


def step_of(event: gr.EventData) -> int | None:
    """The step (``target``'s ``by``) of the trigger that sent ``event``.

    Rule: the trigger is the event's ``target`` (passed along a chain by Gradio's front end),
    known by its elem_id (``STEPS``).

    Args:
        event: the event's data, as Gradio gives it to a parameter annotated ``gr.EventData``.

    Returns:
        1 for ``#route-next``, -1 for ``#route-prev``, None for ``#route-select``; gr.Error for
        any other sender.
    """
    trigger = sender(event)
    if trigger not in STEPS:
        raise gr.Error(f"this event takes the route's buttons or picker; got {trigger or 'none'}")
    return STEPS[trigger]


def target(by: int | None, choice: str | None) -> int:
    """The chapter a route event opens from the picker's ``choice`` (the open chapter's, or
    None before the first): the next (``by`` = 1; after the last, the first again), the
    previous (-1), or ``choice`` itself (``by`` None: the picker's own event); -1 for none."""
    if by is None:
        return CHOICES.index(choice) if choice in CHOICES else NOT_STARTED
    index = CHOICES.index(choice) if choice in CHOICES else NOT_STARTED
    return max(index + by, 0) % len(ROUTE)


@dataclass
class Route:
    """The route's components (see the module rule)."""

    counter: gr.Markdown
    question: gr.Markdown
    select: gr.Dropdown
    prev: gr.Button
    next: gr.Button
    view: gr.Column
    claim: gr.Markdown
    payoff: gr.Markdown
    chart: gr.Plot
    payoff_chart: gr.Plot


def build() -> Route:
    """The route's panel (call where the page's first screen is)."""
    with gr.Column(elem_id="route"):
        gr.Markdown(BLURB, elem_id="route-intro")
        with gr.Row(elem_id="route-nav", equal_height=True):
            prev = gr.Button(
                "Previous", visible=False, elem_id="route-prev", scale=0, min_width=120
            )
            next_ = gr.Button(START_LABEL, variant="primary", elem_id="route-next", scale=2)
            select = gr.Dropdown(
                CHOICES,
                value=None,
                label="go to chapter",
                elem_id="route-select",
                scale=1,
                min_width=220,
            )
        counter_ = gr.Markdown(elem_id="route-counter", visible="hidden")
        question = gr.Markdown(elem_id="route-chapter", visible="hidden")
        # The claim beside its picture, then the payoff beside its chart (on a phone each text
        # right above its picture, so a claim and its picture share the screen). Mounted with the
        # page, so the first chapter's picture is drawn into a chart that is already there; the
        # page's CSS keeps it out of sight (no space) until a chapter opens (``ROUTE_OPENED``).
        with gr.Column(elem_id="route-view") as view:
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=300):
                    claim = gr.Markdown(elem_id="route-claim")
                with gr.Column(scale=3, min_width=300):
                    chart = gr.Plot(
                        label="the chapter chart", show_label=False, elem_id="route-chart"
                    )
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=300):
                    payoff = gr.Markdown(elem_id="route-payoff")
                with gr.Column(scale=3, min_width=300):
                    payoff_chart = gr.Plot(
                        label="the training it leads to",
                        show_label=False,
                        visible=False,
                        elem_id="route-payoff-chart",
                    )
    return Route(
        counter_,
        question,
        select,
        prev,
        next_,
        view,
        claim,
        payoff,
        chart,
        payoff_chart,
    )


def step_lesson(lesson_id: str) -> StepLesson:
    """The step lesson whose settings open a chapter on lesson ``lesson_id``: the lesson itself,
    or a training lesson's step settings."""
    lesson = LESSONS[lesson_id]
    return lesson if isinstance(lesson, StepLesson) else examples.step_part(lesson_id)


def _run_text(lesson_id: str) -> str:
    """What computing lesson ``lesson_id``'s run is, in a few words."""
    lesson = LESSONS[lesson_id]
    config = lesson.config()
    what = f"{config.compute_dtype}, S = {config.loss_scale:g}"
    if isinstance(lesson, DynamicsLesson):
        return f"a training run of {config.steps} steps ({what})"
    return f"one step ({what})"


def working_text(index: int) -> str:
    """What the chapter's area says while chapter ``index``'s runs compute."""
    chapter = ROUTE[index]
    if chapter.sums_up:
        runs = "one step in each format, and every chapter's runs for the list"
    else:
        runs = ", then ".join(_run_text(name) for name in reads(chapter))
    return f"**{chapter.title}**: computing {runs} ..."


def opening_js(by: int | None) -> str:
    """The browser's answer to a route button or the picker, the instant it is used: the
    buttons marked busy, and the chapter's area shown (before the first chapter it is hidden),
    saying what the chapter to open computes (as ``target`` picks it from the picker's
    value)."""
    texts = json.dumps([working_text(index) for index in range(len(ROUTE))])
    choices = json.dumps(CHOICES)
    step = "null" if by is None else str(by)
    return f"""(choice, claim) => {{
  {_BUTTONS}.forEach(b => {{
    b.classList.add('{BUSY_CLASS}'); b.setAttribute('aria-busy', 'true'); }});
  document.body.classList.add('{ROUTE_OPENED}');  // the chapter's area in sight from now on
  const texts = {texts}, choices = {choices}, by = {step}, index = choices.indexOf(choice);
  const opened = by === null ? index : (Math.max(index + by, 0) % texts.length);
  const shown = {{__type__: 'update', visible: true}};  // the chapter's area, from the first
  return opened < 0 ? [claim, shown] : [texts[opened], shown];
}}"""


def nav(index: int) -> dict[str, Any]:
    """The header of chapter ``index``: where the learner is, the question, previous / next."""
    chapter, number = ROUTE[index], index + 1
    following = (
        f"Next: {number + 1}. {ROUTE[index + 1].title}"
        if number < len(ROUTE)
        else f"Start again: 1. {ROUTE[0].title}"
    )
    return {
        "counter": gr.update(value=counter(number), visible=True),
        "question": gr.update(value=question_text(chapter, number), visible=True),
        "select": CHOICES[index],
        "prev": gr.update(visible=index > 0),
        "next": following,
    }


def run_of(lesson_id: str) -> Any:
    """Lesson ``lesson_id``'s run, as the page keeps it: a training lesson's for the process
    (``examples.training_run``), a step lesson's in the page's report cache."""
    lesson = LESSONS[lesson_id]
    if isinstance(lesson, DynamicsLesson):
        return examples.training_run(lesson_id)
    return cached_report(lesson.config(), None)


def view(index: int) -> dict[str, Any]:
    """The claim, the chart and the payoff of chapter ``index``, from the runs it reads."""
    chapter = ROUTE[index]
    shown = chapter_view(chapter, {name: run_of(name) for name in reads(chapter)}, index + 1)
    return {
        "view": gr.update(visible=True),
        "claim": shown.claim,
        "payoff": shown.payoff,
        "chart": gr.update(
            value=as_plot(shown.chart) if shown.chart else None, visible=shown.chart is not None
        ),
        "payoff_chart": gr.update(
            value=as_plot(shown.payoff_chart) if shown.payoff_chart else None,
            visible=shown.payoff_chart is not None,
        ),
    }


@dataclass(frozen=True)
class Opener:
    """A chapter's step, for the page's one chain of lesson events (``ui.wiring``): the
    route's ``triggers``, the components the step sets beyond a lesson's (``outputs``: the
    Training dynamics tab's run inputs, the route's header), and ``answer(trigger, choice,
    last, shown)``, the step's updates by component for the trigger with elem_id ``trigger``
    (a key of ``STEPS``) from the picker's ``choice``; None when it opens no chapter (a cleared
    picker)."""

    triggers: list[Any]
    outputs: list[Any]
    answer: Callable[[str, Any, Any, Any], dict[Any, Any] | None]


def triggers(route: Route) -> list[Any]:
    """The route's triggers, in ``STEPS``' order: next, previous, the picker."""
    return [route.next.click, route.prev.click, route.select.input]


def opener(route: Route, page: Any, run_step_lesson: Callable[..., dict]) -> Opener:
    """The chapter's step (see the rule): ``run_step_lesson(lesson, last, shown)`` answers a
    step lesson by the page's keys."""
    dynamics = page.sections["dynamics"]
    run_controls = [dynamics.controls[name] for name in RUN_FIELDS]
    header = [route.counter, route.question, route.select, route.prev, route.next]

    def opened(index: int, last: Any, shown: Any) -> dict[Any, Any]:
        chapter = ROUTE[index]
        updates = run_step_lesson(step_lesson(chapter.lesson), last, shown)
        updates = {key: value for key, value in updates.items() if key not in ("tabs", "open_tab")}
        answer = {page[key]: value for key, value in updates.items()}
        answer[page.caption] = gr.update(visible=False)  # the claim is the route's
        lesson = LESSONS[chapter.lesson]
        if isinstance(lesson, DynamicsLesson):
            answer |= {dynamics.controls[n]: v for n, v in lesson.run_inputs.items()}
        return answer | {getattr(route, name): value for name, value in nav(index).items()}

    def answer(trigger: str, choice: Any, last: Any, shown: Any) -> dict[Any, Any] | None:
        index = target(STEPS[trigger], choice)
        return None if index == NOT_STARTED else opened(index, last, shown)

    return Opener(triggers(route), [*run_controls, *header], answer)


def wire(route: Route, page: Any) -> None:
    """The route's own events (see the rule): each trigger's instant answer in the browser,
    and, from the same click, the chapter's claim and picture. The chapter's step is a link of
    the page's chain of lesson events (``opener``)."""

    def on_view(choice: Any, event: gr.EventData) -> Any:
        index = target(step_of(event), choice)
        if index == NOT_STARTED:  # the picker cleared: no chapter to show
            return gr.skip()
        return {getattr(route, name): value for name, value in view(index).items()}

    view_outputs = [route.view, route.claim, route.payoff, route.chart]
    view_outputs.append(route.payoff_chart)
    used = triggers(route)
    for trigger, by in zip(used, STEPS.values(), strict=True):
        # At once, in the browser: the buttons busy, the chapter's area saying what it computes
        # (one listener per trigger: the browser's answer knows no trigger but its own).
        trigger(
            None,
            [route.select, route.claim],
            [route.claim, route.view],
            js=opening_js(by),
            api_visibility="private",
            **quiet_progress(page.notices_shown),
        )
    gr.on(
        used,
        on_view,
        [route.select],
        view_outputs,
        concurrency_limit=1,
        concurrency_id="heavy",  # the sweep's and the training runs' concurrency group
        api_visibility="private",
        show_progress="minimal",
        show_progress_on=[route.claim],
        **examples.BY_CLICK,
    ).then(fn=None, js=OPENED_JS)
