"""A StepReport as a JSON-able dict and as a few plain-language sentences.

Rule: every number here is read from the report or from ``jnp.finfo``; nothing is typed in.
Non-finite floats become the strings "inf", "-inf" and "nan", because JSON has no such numbers.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from playground.precision import dtype_facts
from playground.report import StepReport

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
# float32 resolves about 7.2 decimal digits; agreement is never claimed beyond that.
FLOAT32_DIGITS = -math.log10(float(jnp.finfo(jnp.float32).eps) / 2)


def json_number(value: float) -> float | int | str:
    """A float for JSON: finite values unchanged, others as "inf", "-inf" or "nan"."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    return float(value) if math.isfinite(value) else str(float(value))


def agreeing_digits(value: float, reference: float) -> float:
    """Significant decimal digits on which ``value`` agrees with ``reference``.

    -log10(|value - reference| / |reference|), clipped to [0, float32's ~7.2 digits]; 0 when
    either is not finite, the float32 limit when they are equal.
    """
    if not (math.isfinite(value) and math.isfinite(reference)):
        return 0.0
    if value == reference:
        return FLOAT32_DIGITS
    scale = abs(reference) if reference != 0 else abs(value)
    return float(min(max(-math.log10(abs(value - reference) / scale), 0.0), FLOAT32_DIGITS))


def summarize(report: StepReport) -> dict[str, Any]:
    """The numbers shown on the page, as a JSON-able dict (the API's ``summary`` output)."""
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
        "reading": reading(report),
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
            "than half the float32 spacing at that parameter."
        )
    return sentences
