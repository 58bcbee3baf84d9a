"""A StepReport as a JSON-able dict and as a few plain-language sentences.

Rule: every number here is read from the report or from the dtype registry; nothing is typed in.
Non-finite floats become the documented strings of ``views.numbers.json_number``.
"""

from __future__ import annotations

import math
from typing import Any

from playground.core.dtypes import dtype_facts
from playground.core.report import StepReport
from playground.views.numbers import agreeing_digits, json_number

PARAM_STATS = (
    "norm_rel_error",
    "median_rel_error",
    "max_rel_error",
    "underflow_count",
    "nonfinite_scaled_count",
    "nonfinite_count",
    "lost_update_count",
    "median_update_ratio",
    "size",
)


def summarize(report: StepReport, sentences: list[str] | None = None) -> dict[str, Any]:
    """The numbers shown on the page, as a JSON-able dict (the API's ``summary`` output).

    ``sentences`` is ``reading(report)`` when the caller has it already.
    """
    losses = {
        "mixed_initial": report.mixed_initial_loss,
        "mixed_new": report.mixed_new_loss,
        "float32_initial": report.float32_initial_loss,
        "float32_new": report.float32_new_loss,
        "new_difference": report.mixed_new_loss - report.float32_new_loss,
    }
    return {
        "config": report.config.to_dict(),
        "losses": {name: json_number(value) for name, value in losses.items()},
        "agreeing_digits": round(
            agreeing_digits(report.mixed_new_loss, report.float32_new_loss), 2
        ),
        "params": {
            name: {stat: json_number(getattr(param, stat)) for stat in PARAM_STATS}
            for name, param in report.params.items()
        },
        "magnitudes": report.magnitudes,
        "reading": reading(report) if sentences is None else sentences,
    }


def _count(count: int, size: int) -> str:
    return f"{count:,} of {size:,}"


def reading(report: StepReport) -> list[str]:
    """A few sentences that interpret the report for a reader new to mixed precision."""
    config = report.config
    dtype = config.compute_dtype
    facts = dtype_facts(dtype)
    digits = agreeing_digits(report.mixed_new_loss, report.float32_new_loss)
    sentences = [
        (
            f"After one step the {dtype} mixed-precision loss is {report.mixed_new_loss:.6g} and "
            f"the float32 loss is {report.float32_new_loss:.6g}: they agree to {digits:.1f} "
            f"significant digits, while {dtype} itself keeps about {facts.decimal_digits:.1f}."
        )
    ]
    if math.isfinite(report.mixed_new_loss) and math.isfinite(report.mixed_initial_loss):
        lowered = report.mixed_new_loss < report.mixed_initial_loss
        direction = "lowered" if lowered else "did not lower"
        sentences.append(
            f"The mixed step {direction} its loss (from {report.mixed_initial_loss:.6g} to "
            f"{report.mixed_new_loss:.6g})."
        )
    for param in report.params.values():
        sentence = (
            f"The {param.name} gradient differs from float32 by "
            f"{param.norm_rel_error:.3g} in relative norm"
        )
        if param.underflow_count:
            sentence += (
                f"; {_count(param.underflow_count, param.size)} entries are exactly zero in the "
                "mixed gradient but not in float32 (rounded or flushed to zero; "
                f"{dtype}'s smallest subnormal is {facts.smallest_subnormal:.3g})"
            )
        if param.nonfinite_scaled_count:
            sentence += (
                f"; {_count(param.nonfinite_scaled_count, param.size)} scaled entries overflowed "
                f"past {dtype}'s largest value, {facts.max:.4g}"
            )
        sentences.append(sentence + ".")
    if any(p.nonfinite_scaled_count for p in report.params.values()):
        sentences.append(
            f"A fixed loss scale of {config.loss_scale:.6g} is too large here: the overflowed "
            "gradients reached the update unchanged, which is what dynamic loss scaling detects "
            "and skips."
        )
    lost = sum(p.lost_update_count for p in report.params.values())
    if lost:
        sentences.append(
            f"{lost:,} parameter updates were rounded away entirely: lr x gradient was smaller "
            "than half the float32 spacing at that parameter (or exactly half, rounded to even)."
        )
    return sentences
