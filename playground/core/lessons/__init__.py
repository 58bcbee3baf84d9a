"""Lessons: named scenarios whose claims are computed from their own runs and checked.

Every lesson lives here and returns the one ``Claim`` type (``claim``'s rule):
``STEP_LESSONS`` (one step each: ``step``, the block-scaling one from ``blocks``),
``PRECISION_LESSONS`` (precision per operation, one step each: ``precision``),
``TRANSFORMER_LESSONS`` (the transformer block's, one step each: ``transformer``),
``ENDING_LESSONS`` (the route's last chapter: every format on one step, ``ending``) and
``DYNAMICS_LESSONS`` (training runs: ``dynamics``). ``LESSONS`` holds them all by their stable
id, and ``lesson(id)`` finds one: the page and the tests look lessons up by id, never by their
position. ``route`` orders them into the page's numbered chapters.
"""

from playground.core.lessons.claim import (
    DYNAMICS_TAB,
    RUN_FIELDS,
    Claim,
    DynamicsLesson,
    StepLesson,
)
from playground.core.lessons.dynamics import DYNAMICS_LESSONS, GRAD_SCALER_INIT
from playground.core.lessons.ending import ENDING_LESSONS
from playground.core.lessons.precision import PRECISION_LESSONS
from playground.core.lessons.step import STEP_LESSONS
from playground.core.lessons.transformer import TRANSFORMER_LESSONS

Lesson = StepLesson | DynamicsLesson
LESSONS: dict[str, Lesson] = {
    each.id: each
    for each in (
        *STEP_LESSONS,
        *PRECISION_LESSONS,
        *TRANSFORMER_LESSONS,
        *ENDING_LESSONS,
        *DYNAMICS_LESSONS,
    )
}


def lesson(lesson_id: str) -> Lesson:
    """The lesson whose id is ``lesson_id``; ValueError naming the ids there are otherwise."""
    try:
        return LESSONS[lesson_id]
    except KeyError:
        raise ValueError(f"no lesson {lesson_id!r}; the lessons are {', '.join(LESSONS)}") from None


__all__ = [
    "DYNAMICS_LESSONS",
    "DYNAMICS_TAB",
    "ENDING_LESSONS",
    "GRAD_SCALER_INIT",
    "LESSONS",
    "PRECISION_LESSONS",
    "RUN_FIELDS",
    "STEP_LESSONS",
    "TRANSFORMER_LESSONS",
    "Claim",
    "DynamicsLesson",
    "Lesson",
    "StepLesson",
    "lesson",
]
