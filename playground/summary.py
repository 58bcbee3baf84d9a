"""A StepReport as a JSON-able dict and as a few plain-language sentences.

Rule: every number here is read from the report or from ``jnp.finfo``; nothing is typed in.
Non-finite floats become the strings "inf", "-inf" and "nan", because JSON has no such numbers.
"""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpy as np

from playground.dynamics import DynamicsReport
from playground.precision import classify, dtype_facts
from playground.report import StepReport
from playground.sweep import SAFE_FACTOR, SweepReport

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


def magnitude_counts(report: StepReport) -> dict[str, dict[str, int]]:
    """Where the gradient entries (kernel and bias together) sit in the compute dtype.

    "before scaling": the float32 twin's gradient cast to the dtype as it is, i.e. what an
    unscaled low-precision gradient would at best be. "after scaling": the scaled gradients the
    low-precision backward pass actually produced. "lost to zero" counts entries that are zero
    there but not in float32; "non-finite" counts inf and NaN (after an overflow).
    """
    dtype = report.config.compute_dtype
    base = np.concatenate([p.float32_grads.ravel() for p in report.params.values()])
    scaled = np.concatenate([p.scaled_grads.ravel() for p in report.params.values()])
    before, after = classify(base, dtype), classify(scaled, dtype)
    return {
        "before scaling": {
            "lost to zero": before["flushed"],
            "subnormal": before["subnormal"],
            "non-finite": before["overflow"] + before["nonfinite"],
        },
        "after scaling": {
            "lost to zero": int(np.sum((scaled == 0) & (base != 0))),
            "subnormal": after["subnormal"],
            "non-finite": after["nonfinite"],
        },
        "entries": {"total": int(base.size)},
    }


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
        "magnitudes": magnitude_counts(report),
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
            "than half the float32 spacing at that parameter (or exactly half, rounded to even)."
        )
    return sentences


def sweep_summary(sweep: SweepReport) -> dict[str, Any]:
    """The sweep's curves and its reading, as a JSON-able dict (the API's ``sweep`` output)."""
    curves = {
        "rel_error": sweep.rel_error,
        "underflow_share": sweep.underflow_share,
        "nonfinite_share": sweep.nonfinite_share,
        "new_loss": sweep.new_loss,
    }
    return {
        "config": sweep.config.to_dict(),
        "log2_scales": sweep.exponents.tolist(),
        **{name: [json_number(v) for v in values.tolist()] for name, values in curves.items()},
        "float32_new_loss": json_number(sweep.float32_new_loss),
        "safe_log2_scales": sweep.safe_exponents.tolist(),
        "reading": sweep_reading(sweep),
    }


def sweep_reading(sweep: SweepReport) -> list[str]:
    """Where the safe window lies, where the user's scale sits, what goes wrong outside it."""
    dtype = sweep.config.compute_dtype
    safe = sweep.safe_exponents
    current = math.log2(sweep.config.loss_scale)
    best = float(np.nanmin(np.where(np.isfinite(sweep.rel_error), sweep.rel_error, np.nan)))
    sentences = [
        f"Scales from 2^{safe.min()} to 2^{safe.max()} give {dtype} gradients within "
        f"{SAFE_FACTOR:g}x of the best relative error in the sweep ({best:.3g})."
        if safe.size
        else f"No scale in the sweep gives finite {dtype} gradients."
    ]
    inside = safe.size and any(abs(current - e) < 1e-9 for e in safe)
    sentences.append(
        f"Your loss scale 2^{current:.3g} is {'inside' if inside else 'outside'} that window."
    )
    if sweep.underflow_share[0] > 0:
        sentences.append(
            f"Without scaling, {sweep.underflow_share[0]:.1%} of the gradient entries come out "
            f"as zero in {dtype}."
        )
    overflowing = sweep.exponents[sweep.nonfinite_share > 0]
    if overflowing.size:
        sentences.append(
            f"From 2^{overflowing.min()} on, some scaled gradients overflow {dtype} to inf."
        )
    return sentences


def dynamics_summary(dynamics: DynamicsReport) -> dict[str, Any]:
    """Final losses, skip and lost-update counts and the reading, as a JSON-able dict."""
    return {
        "config": dynamics.config.to_dict(),
        "steps": dynamics.steps,
        "mode": dynamics.mode,
        "period": dynamics.period,
        "final_loss": {
            run: json_number(float(getattr(dynamics, f"{run}_loss")[-1]))
            for run in ("float32", "mixed", "pure")
        },
        "mixed_skipped_steps": np.flatnonzero(dynamics.mixed_skipped).tolist(),
        "mixed_applied_updates": dynamics.mixed_applied,
        "final_mixed_scale": json_number(float(dynamics.mixed_scale[-1])),
        "mean_lost_share": {
            "mixed": float(dynamics.mixed_lost_share.mean()),
            "pure": float(dynamics.pure_lost_share.mean()),
        },
        "reading": dynamics_reading(dynamics),
    }


def dynamics_reading(dynamics: DynamicsReport) -> list[str]:
    """What the three curves say, in numbers."""
    dtype = dynamics.config.compute_dtype
    first, last = 0, dynamics.steps - 1

    def change(run: str) -> str:
        curve = getattr(dynamics, f"{run}_loss")
        return f"{curve[first]:.4g} -> {curve[last]:.4g}"

    sentences = [
        (
            f"Over {dynamics.steps} steps the loss went {change('float32')} in float32, "
            f"{change('mixed')} with {dtype} compute and float32 master weights, and "
            f"{change('pure')} with the parameters stored in {dtype}."
        ),
        (
            f"In the pure {dtype} run, {dynamics.pure_lost_share.mean():.1%} of the parameter "
            f"updates per step were rounded away entirely (p + delta == p); with float32 master "
            f"weights, {dynamics.mixed_lost_share.mean():.1%}."
        ),
    ]
    if dynamics.mode == "dynamic":
        skipped = np.flatnonzero(dynamics.mixed_skipped)
        listed = ", ".join(str(step) for step in skipped[:8])
        listed += ", ..." if skipped.size > 8 else ""
        sentences.append(
            f"Dynamic scaling skipped {skipped.size} of {dynamics.steps} updates"
            + (f" (steps {listed})" if skipped.size else "")
            + f" and ended at S = {dynamics.mixed_scale[-1]:.6g}."
        )
    return sentences
