"""A float8 step in words: the recipe, the scaling used, what saturated or flushed.

Rule: every number is read from the report's float8 tensors (``core.recipes.float8_report``, whose
summary hook gives the same tensors as JSON) or from the recipe and dtype registries; a report
without quantized tensors (another recipe's) has nothing to say here.
"""

from __future__ import annotations

import math

from playground.core.formats.dtypes import cast, dtype_facts
from playground.core.recipes.float8_report import Float8Tensor
from playground.core.recipes.registry import recipe
from playground.core.step.report import StepReport
from playground.sections.step.blocks import block_sentence

ROLE_NAMES = {"input": "input", "kernel": "weights", "gradient": "gradient"}


def _name(tensor: Float8Tensor) -> str:
    return f"{tensor.layer} {ROLE_NAMES[tensor.role]}"


def _limits(fmt: str) -> str:
    facts = dtype_facts(fmt)
    return f"{fmt} (largest {facts.max:g}, smallest subnormal {facts.smallest_subnormal:.3g})"


def past_largest(formats: tuple[str, ...]) -> str:
    """What a plain cast makes of a finite value past each format's largest, read from the cast
    itself: ", where a plain cast gives NaN in float8_e4m3fn or inf in float8_e5m2", or, for a
    format whose cast clips (float4_e2m1fn has no inf and no NaN), ", as a plain cast to
    float4_e2m1fn does too"."""
    fates: dict[str, list[str]] = {}
    for fmt in dict.fromkeys(formats):
        beyond = float(cast(2 * dtype_facts(fmt).max, fmt)[()])
        fate = "NaN" if math.isnan(beyond) else "inf" if math.isinf(beyond) else "clip"
        fates.setdefault(fate, []).append(fmt)
    parts = [f"{fate} in {' and '.join(fmts)}" for fate, fmts in fates.items() if fate != "clip"]
    text = f", where a plain cast gives {' or '.join(parts)}" if parts else ""
    if "clip" in fates:
        clipping = " and ".join(fates["clip"])
        text += f"; a plain cast to {clipping} clips too" if parts else ""
        text += "" if parts else f", as a plain cast to {clipping} does too"
    return text


def _listed(tensors: list[Float8Tensor], field: str) -> str:
    """'<name>: n of size, ...' for the tensors where ``field`` is nonzero, at most six."""
    hits = [t for t in tensors if getattr(t, field)]
    parts = [f"{_name(t)} {getattr(t, field):,} of {t.size:,}" for t in hits[:6]]
    return "; ".join(parts) + ("; ..." if len(hits) > 6 else "")


def _scales(tensors: list[Float8Tensor]) -> str:
    """Each tensor's amax and scale for a shallow model; their range for a deep one."""
    if len(tensors) <= 6:
        return "; ".join(f"{_name(t)}: amax {t.amax:.3g}, scale {t.scale:.4g}" for t in tensors)
    low = min(tensors, key=lambda t: t.scale)
    high = max(tensors, key=lambda t: t.scale)
    return f"from {low.scale:.4g} ({_name(low)}) to {high.scale:.4g} ({_name(high)})"


def float8_sentences(report: StepReport) -> list[str]:
    """The recipe, the scaling this step used (with its numbers), what saturated and flushed."""
    tensors = list(report.float8)
    if not tensors:
        return []
    config = report.config
    chosen = recipe(config.compute_dtype)
    forward, gradient = chosen.forward_format, chosen.gradient_format
    sentences = [
        block_sentence(report)  # a block recipe: its scales are the Block scaling tab's
        if chosen.block is not None
        else (
            f"The {chosen.name} recipe casts the input and weights of every matmul to "
            f"{_limits(forward)} and the gradient arriving at its output to {_limits(gradient)}; "
            "the products add up in float32, and the bias, the activations, the loss and the "
            "loss scale stay float32. Values beyond a format's largest are clipped to it "
            f"(saturation, as TransformerEngine casts), where a plain cast to {forward} would "
            "give NaN."
        )
    ]
    if chosen.scalings and config.fp8_scaling == "none":
        sentences.append(
            "No per-tensor scaling (fp8_scaling none): each tensor is cast as it is, so only the "
            f"loss scale {config.loss_scale:.6g} moves the gradients within {gradient}'s range."
        )
    elif chosen.scalings and config.fp8_scaling == "current":
        sentences.append(
            "Current scaling: each tensor was multiplied by its format's largest value over its "
            "own amax (largest |entry|) before the cast, so its largest entry lands on that "
            "value and a power-of-two loss scale changes nothing in the rounding. Scales: "
            f"{_scales(tensors)}."
        )
    elif chosen.scalings:
        sentences.append(
            "Delayed scaling takes each tensor's scale from the largest amax of the last "
            f"{config.amax_history} steps (TransformerEngine's rule). This single step starts a "
            "fresh history, which has no past: it used TransformerEngine's initial scale 1 for "
            "every tensor, the same as no scaling, and the new loss used the scales the next "
            "step would take from this step's amax values. The Training dynamics tab carries "
            "the history from step to step."
        )
    saturated = sum(t.saturated for t in tensors)
    flushed = sum(t.flushed for t in tensors)
    total = sum(t.size for t in tensors)
    saturated_list = f" ({_listed(tensors, 'saturated')})" if saturated else ""
    flushed_list = f" ({_listed(tensors, 'flushed')})" if flushed else ""
    sentences.append(
        "Saturated (beyond the format's range once scaled, so clipped to its largest value"
        f"{past_largest((forward, gradient))}): {saturated:,} of {total:,} quantized "
        f"entries{saturated_list}."
    )
    sentences.append(
        "Flushed to zero (nonzero, but at most half the format's smallest subnormal once "
        f"scaled): {flushed:,} of {total:,}{flushed_list}."
    )
    return sentences
