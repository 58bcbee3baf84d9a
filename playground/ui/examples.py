"""The guided examples: each one is a lesson of one run, a caption and a place to look.

Rule: an example is a set of overrides of the table's defaults (every other setting goes back to
its default, and uploaded data is cleared), applied together and run once. Its caption is written
from that run's report, so every number in it is computed; ``tab`` is the section tab that shows
the lesson (None: the figure above the tabs) and ``target`` the element scrolled into view.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playground.core.dtypes import dtype_facts
from playground.core.report import StepReport


def _flushed(report: StepReport) -> int:
    return sum(p.underflow_count for p in report.params.values())


def _nonfinite(report: StepReport) -> int:
    return sum(p.nonfinite_scaled_count for p in report.params.values())


def _entries(report: StepReport) -> int:
    return sum(p.size for p in report.params.values())


def _agree(report: StepReport) -> str:
    error = report.kernel.norm_rel_error
    difference = report.mixed_new_loss - report.float32_new_loss
    return (
        f"bfloat16 keeps about {dtype_facts('bfloat16').decimal_digits:.1f} significant decimal "
        "digits, yet this step follows float32 closely: "
        f"the kernel's gradient differs from float32's by {error:.2e} (relative, in norm) and the "
        f"new loss by {difference:.3g}. The points of the comparison below sit on the diagonal."
    )


def _flush(report: StepReport) -> str:
    flushed, total = _flushed(report), _entries(report)
    return (
        "Inputs and targets of size 2^-12 make gradients far below float16's smallest normal "
        f"number: {flushed:,} of {total:,} gradient entries ({flushed / total:.0%}) come back as "
        "0 after unscaling (the bars left of the shaded bands in the figure above). "
        f"The new loss is {report.mixed_new_loss:.4g} against float32's "
        f"{report.float32_new_loss:.4g}."
    )


def _come_back(report: StepReport) -> str:
    flushed = _flushed(report)
    return (
        "The same tiny data with the loss multiplied by 2^15 before differentiation: the scaled "
        f"gradients land inside float16's normal range and {flushed:,} entries are lost to zero "
        "(see the bars move right in the figure above). In one step the loss itself barely "
        f"moves (new loss {report.mixed_new_loss:.4g}, float32 {report.float32_new_loss:.4g}): "
        "what the scale rescued is the gradients, and over many steps the training."
    )


def _overflow(report: StepReport) -> str:
    return (
        f"float16's largest value is {dtype_facts('float16').max:g}; the scaled gradients of the "
        "default batch times 2^16 "
        f"pass it: {_nonfinite(report):,} of {_entries(report):,} scaled gradient entries are inf "
        f"or NaN, so the update is not finite and the new loss is {report.mixed_new_loss}. A "
        "dynamic loss scale would skip this step and halve S (try the Training dynamics tab with "
        "loss scaling = dynamic)."
    )


@dataclass(frozen=True)
class Lesson:
    """One guided example: its button label, the settings it changes, where to look, and the
    caption written from its report."""

    label: str
    overrides: dict[str, Any]
    caption: Callable[[StepReport], str]
    tab: str | None
    target: str


LESSONS = (
    Lesson("bfloat16, well behaved", {}, _agree, "Float32 comparison", "example-caption"),
    Lesson(
        "float16, tiny data, S = 1: gradients flush to 0",
        {
            "compute_dtype": "float16",
            "input_scale": 2.0**-12,
            "target_scale": 2.0**-12,
            "loss_scale": 1.0,
        },
        _flush,
        None,
        "magnitude-figure",
    ),
    Lesson(
        "same data, S = 2^15: the gradients come back",
        {
            "compute_dtype": "float16",
            "input_scale": 2.0**-12,
            "target_scale": 2.0**-12,
            "loss_scale": 2.0**15,
        },
        _come_back,
        None,
        "magnitude-figure",
    ),
    Lesson(
        "float16, S = 2^16: the scale overflows",
        {"compute_dtype": "float16", "loss_scale": 2.0**16},
        _overflow,
        None,
        "magnitude-figure",
    ),
)
# (label, overrides) pairs, as scripts and tests read the examples.
EXAMPLES = tuple((lesson.label, lesson.overrides) for lesson in LESSONS)


def caption_text(lesson: Lesson, report: StepReport) -> str:
    """The Markdown caption shown under the example buttons after ``lesson`` ran."""
    return f"**{lesson.label}.** {lesson.caption(report)}"
