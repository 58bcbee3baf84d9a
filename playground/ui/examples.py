"""The lesson buttons: the step lessons above the tabs, the training lessons in the Training
dynamics tab (the lessons themselves, their settings and claims, are ``core.lessons``).

Rule: a button applies its lesson's settings together (every other setting back to its default,
uploaded data cleared) and runs the lesson once. Its caption is the lesson's claim, written from
that run, and only when the claim's condition holds; when it does not, the caption says so and
gives the condition with the numbers that failed it (and a training lesson's button says it does
not hold here), so the page never teaches a claim its own numbers contradict.

A training lesson first commits its step settings as a step lesson does (the results above the
tabs, the controls, the Training dynamics tab selected), then trains in the ``heavy``
concurrency group and fills
the tab as the train button does: reading, JSON, charts (with the session's pins), and the
lesson's claim under its buttons (``#training-lesson-caption``).

Every lesson is found by its id (``core.lessons``): a button's elem_id is ``lesson-<id>``. One
chain of events serves every button of a row (``gr.on`` on their clicks): its handlers read the
clicked button from the event's ``gr.EventData`` (``clicked``), whose ``target`` Gradio's front
end passes along the chain. Each click runs ("multiple"): deferred ("always_last"), a click
made while the chain ran would rerun with the target of the click it waited for.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import gradio as gr

from playground.core.lessons import (
    DYNAMICS_LESSONS,
    ENDING_LESSONS,
    PRECISION_LESSONS,
    RUN_FIELDS,
    STEP_LESSONS,
    TRANSFORMER_LESSONS,
    Claim,
    DynamicsLesson,
    StepLesson,
)
from playground.core.runs.train import DynamicsReport
from playground.core.step.report import StepReport
from playground.sections.dynamics import tab as dynamics_tab
from playground.sections.dynamics.curves import curves_of
from playground.ui.widgets import as_plot, plotted, sender

Lesson = StepLesson
# The step lessons, then precision per operation's (they point at the operations table), the
# transformer block's, and the route's ending (every format on one step).
LESSONS = (*STEP_LESSONS, *PRECISION_LESSONS, *TRANSFORMER_LESSONS, *ENDING_LESSONS)
# (label, overrides) pairs, as scripts and tests read the examples.
EXAMPLES = tuple((lesson.label, lesson.overrides) for lesson in LESSONS)
# The training lessons by id, in the order of their row.
TRAINING_LESSONS: dict[str, DynamicsLesson] = {lesson.id: lesson for lesson in DYNAMICS_LESSONS}
NOT_HELD = " (does not hold here)"
L = TypeVar("L", StepLesson, DynamicsLesson)
# The hidden JSON box that names what the lesson just run points at (the page scrolls
# to it: ``ui.wiring``).
SCROLL_TARGET_ID = "lesson-scroll-target"
# A shared chain's server events: every click runs (see the module rule).
BY_CLICK = {"trigger_mode": "multiple"}


def button_id(lesson: StepLesson | DynamicsLesson) -> str:
    """The elem_id of ``lesson``'s button."""
    return f"lesson-{lesson.id}"


def clicked(event: gr.EventData, lessons: Iterable[L]) -> L:
    """The lesson among ``lessons`` whose button sent ``event``.

    Rule: the button is the event's ``target`` (the component clicked, passed along a chain),
    known by its elem_id (``button_id``), never by its label.

    Args:
        event: the event's data, as Gradio gives it to a parameter annotated ``gr.EventData``.
        lessons: the lessons one chain of events serves.

    Returns:
        The lesson; gr.Error when no button of ``lessons`` sent the event.
    """
    by_button = {button_id(lesson): lesson for lesson in lessons}
    target = sender(event)
    if target not in by_button:
        raise gr.Error(f"this event takes a click on a lesson button; got {target or 'none'}")
    return by_button[target]


def claim_text(label: str, claim: Claim) -> str:
    """A lesson's Markdown caption: its sentence when the claim holds, else why it is not shown."""
    if claim.holds:
        return f"**{label}.** {claim.sentence}"
    return (
        f"**{label}.** Not taught here: this lesson's condition does not hold with this run's "
        f"numbers ({claim.condition})."
    )


def caption_text(lesson: StepLesson, report: StepReport) -> str:
    """The Markdown caption shown under the example buttons after ``lesson`` ran."""
    return claim_text(lesson.label, lesson.claim(report))


@functools.cache
def training_run(lesson_id: str) -> DynamicsReport:
    """Training lesson ``lesson_id``'s run: fixed settings, so it is computed once per process."""
    return TRAINING_LESSONS[lesson_id].run()


@dataclass
class TrainingLessons:
    """The training lessons' buttons by lesson id (``#lesson-<id>`` in ``#training-lessons``)
    and the caption under them."""

    buttons: dict[str, gr.Button]
    caption: gr.Markdown


def build_training_lessons() -> TrainingLessons:
    """The training lessons' row and caption (call inside the Training dynamics tab)."""
    gr.Markdown(
        "**Lessons over many steps**: each button sets every setting (the rest to defaults), "
        "trains, and states what the run shows, checked against its numbers."
    )
    with gr.Row(elem_id="training-lessons"):
        buttons = {
            lesson_id: gr.Button(lesson.label, size="sm", elem_id=button_id(lesson))
            for lesson_id, lesson in TRAINING_LESSONS.items()
        }
    caption = gr.Markdown(visible=False, elem_id="training-lesson-caption")
    return TrainingLessons(buttons, caption)


def step_part(lesson_id: str) -> StepLesson:
    """Training lesson ``lesson_id``'s step settings, as a step lesson that opens its tab."""
    lesson = TRAINING_LESSONS[lesson_id]
    return StepLesson(
        lesson.id,
        lesson.label,
        lesson.step_overrides,
        lesson.tab,
        lesson.target,
        lambda report: Claim("", "", True),
    )


def trained(lesson_id: str, pins: tuple) -> dict[str, Any]:
    """The Training dynamics tab's answer to lesson ``lesson_id``, by the tab record's names (plus
    ``caption`` and ``button``): the run's views, its curves as the shown run, and its claim."""
    lesson, report = TRAINING_LESSONS[lesson_id], training_run(lesson_id)
    claim = lesson.claim(report)
    views = plotted(dynamics_tab.dynamics_views(report, files=False), dynamics_tab.PLOT_LABELS)
    current = curves_of(report)
    figures = {
        "loss_curves": views.loss_curves,
        "lost_updates": views.lost_updates,
        "scale_curve": views.scale_curve,
    }
    if pins:
        pinned = dynamics_tab.pinned_figures(current, pins)
        figures = {name: as_plot(getattr(pinned, name)) for name in figures}
    button = gr.update() if claim.holds else gr.update(value=lesson.label + NOT_HELD)
    return figures | {
        "dynamics_reading": views.dynamics_reading,
        "dynamics_json": views.dynamics_json,
        "dynamics_files": None,
        "dynamics_charts": gr.Column(visible=True),
        "shown_run": current,
        "dynamics_notes": dynamics_tab.run_notes(current, pins),
        "dynamics_status": gr.update(value="", visible=False),
        "caption": gr.update(value=claim_text(lesson.label, claim), visible=True),
        "button": button,
    }


TAB_OUTPUTS = (
    "loss_curves",
    "lost_updates",
    "scale_curve",
    "dynamics_reading",
    "dynamics_json",
    "dynamics_files",
    "dynamics_charts",
    "shown_run",
    "dynamics_notes",
    "dynamics_status",
)


def wire_training_lessons(
    page: Any,
    tab: Any,
    run_step_lesson: Callable[..., dict],
    step_outputs: list[Any],
    lane: dict[str, Any],
    then_charts: Callable[[Any], None],
) -> None:
    """The training lesson buttons, one chain for all (see the rule). ``tab`` is the Training
    dynamics tab's record (its ``lessons`` built by ``build_training_lessons``);
    ``run_step_lesson(lesson, last, shown)`` answers a step lesson by the page's keys, on
    ``step_outputs``, with the event options ``lane`` (its concurrency group); and
    ``then_charts`` chains the figures above the tabs."""
    parts: TrainingLessons = tab.lessons
    run_controls = [tab.controls[name] for name in RUN_FIELDS]
    buttons = list(parts.buttons.values())

    def on_settings(last: Any, shown: Any, event: gr.EventData) -> Any:
        lesson = clicked(event, TRAINING_LESSONS.values())
        updates = run_step_lesson(step_part(lesson.id), last, shown)
        answer = {page[key]: value for key, value in updates.items()}
        answer[page.caption] = gr.update(visible=False)  # the step lessons' caption
        answer |= {tab.controls[name]: value for name, value in lesson.run_inputs.items()}
        answer[parts.caption] = gr.update(
            value=f"**{lesson.label}.** Training the three runs ...", visible=True
        )
        return answer

    def on_train(pins: Any, event: gr.EventData) -> Any:
        lesson_id = clicked(event, TRAINING_LESSONS.values()).id
        answer = trained(lesson_id, tuple(pins or ()))
        # The clicked button only: the others are left as they are.
        where = {"caption": parts.caption, "button": parts.buttons[lesson_id]}
        return {where.get(name) or getattr(tab, name): value for name, value in answer.items()}

    settings = page.gathering(
        on_settings,
        [page.last_valid, page.notices_shown],
        [*step_outputs, *run_controls, parts.caption],
    ).after(functools.partial(gr.on, [button.click for button in buttons]), **(lane | BY_CLICK))
    then_charts(settings)
    settings.then(
        on_train,
        [tab.pins],
        [*(getattr(tab, name) for name in TAB_OUTPUTS), parts.caption, *buttons],
        concurrency_limit=1,
        concurrency_id="heavy",  # the sweep's and the training runs' concurrency group
        api_visibility="private",
        show_progress="full",
        show_progress_on=[tab.dynamics_reading],
        **BY_CLICK,
    )
