"""Lessons: named scenarios whose claims are computed from their own runs and checked.

``STEP_LESSONS`` (one step each, shown above the tabs or in a step tab) and ``DYNAMICS_LESSONS``
(training runs, shown in the Training dynamics tab); the rule is ``claim``'s.
"""

from playground.core.lessons.claim import (
    DYNAMICS_TAB,
    RUN_FIELDS,
    Claim,
    DynamicsLesson,
    StepLesson,
)
from playground.core.lessons.dynamics import DYNAMICS_LESSONS, GRAD_SCALER_INIT
from playground.core.lessons.step import STEP_LESSONS

__all__ = [
    "DYNAMICS_LESSONS",
    "DYNAMICS_TAB",
    "GRAD_SCALER_INIT",
    "RUN_FIELDS",
    "STEP_LESSONS",
    "Claim",
    "DynamicsLesson",
    "StepLesson",
]
