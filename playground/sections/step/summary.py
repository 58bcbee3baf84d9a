"""A StepReport as a JSON-able dict and as a few plain-language sentences.

Rule: every number here is read from the report or from the dtype registry; nothing is typed in.
Non-finite floats become the documented strings of ``views.numbers.json_number``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from playground.core.dtypes import dtype_facts, subnormals_flushed_here
from playground.core.policy import recipe, recipe_summaries
from playground.core.report import LOG2_LOW, ActivationReport, ParamReport, StepReport
from playground.sections.step.float8_summary import float8_sentences
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
        "activations": [activation_summary(a) for a in report.activations],
        **_json_floats(recipe_summaries(report)),  # by recipe name (float8: its tensors)
        "causes": causes(report),
        "reading": reading(report) if sentences is None else sentences,
    }


def _json_floats(tree: Any) -> Any:
    """``tree`` (dicts and lists) with every float as ``json_number`` writes it."""
    if isinstance(tree, dict):
        return {key: _json_floats(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_json_floats(value) for value in tree]
    return json_number(tree) if isinstance(tree, float) else tree


def activation_summary(activation: ActivationReport) -> dict[str, Any]:
    """One hidden layer's activation gradient: its zero share and its log2 histogram.

    ``log2_histogram.counts[i]`` counts the entries with floor(log2 |g|) == ``first`` + i; the
    bins span the nonzero part of the histogram (empty when every entry is zero or non-finite).
    """
    live = np.flatnonzero(activation.log2_counts)
    first, last = (int(live[0]), int(live[-1])) if live.size else (0, -1)
    return {
        "layer": activation.layer,
        "zero_share": activation.zero_share,
        "zero_count": activation.zero_count,
        "nonfinite_count": activation.nonfinite_count,
        "size": activation.size,
        "log2_histogram": {
            "first": LOG2_LOW + first,
            "counts": activation.log2_counts[first : last + 1].tolist(),
        },
    }


CAUSES = (
    "data_overflow",
    "forward_overflow",
    "scaled_gradient_overflow",
    "gradient_underflow",
    "lr_divergence",
)


def _flushed_in_both(report: StepReport) -> list[ParamReport]:
    """Parameters whose gradient is all zero on both paths.

    The batch never fits exactly (its targets carry noise), so an all-zero float32 gradient is
    one whose exact entries lie below float32's smallest normal number, which a backend that
    flushes subnormals turns into zeros: both paths lose all of it.
    """
    if not subnormals_flushed_here("float32"):
        return []
    return [
        p
        for p in report.params.values()
        if not np.any(p.float32_grads) and not np.any(p.mixed_grads)
    ]


def causes(report: StepReport) -> list[str]:
    """Which of CAUSES explain this report's non-finite or degenerate numbers, in that order.

    data_overflow: the float32 twin's loss is not finite before the step (data too large even
      for float32). forward_overflow: the low-precision loss is not finite where float32's is,
      before the step, or after it with finite parameters. scaled_gradient_overflow: the
      low-precision forward pass is finite but some scaled gradients are not (the scale is too
      large). gradient_underflow: gradient entries are zero in the mixed step but not in
      float32 (the scale is too small for the dtype's range), or zero in both where the loss is
      not (flushed). lr_divergence: the float32 twin's loss starts finite and does not fall
      (not finite, or larger, after the step).
    """
    mixed_initial, mixed_new = report.mixed_initial_loss, report.mixed_new_loss
    float32_initial, float32_new = report.float32_initial_loss, report.float32_new_loss
    params = report.params.values()
    finite_after = all(np.all(np.isfinite(p.mixed_after)) for p in params)
    found = {
        "data_overflow": not math.isfinite(float32_initial),
        "forward_overflow": math.isfinite(float32_initial)
        and (
            not math.isfinite(mixed_initial)
            or (math.isfinite(float32_new) and not math.isfinite(mixed_new) and finite_after)
        ),
        "scaled_gradient_overflow": math.isfinite(mixed_initial)
        and any(p.nonfinite_scaled_count for p in params),
        "gradient_underflow": any(p.underflow_count for p in params)
        or bool(_flushed_in_both(report)),
        "lr_divergence": math.isfinite(float32_initial) and not float32_new <= float32_initial,
    }
    return [code for code in CAUSES if found[code]]


def _cause_sentence(code: str, report: StepReport) -> str:
    config, dtype = report.config, report.config.compute_dtype
    # The forward pass's format and the gradients' (float8: E4M3 and E5M2; else both dtype).
    forward, gradient = recipe(dtype).forward_format, recipe(dtype).gradient_format
    if code == "data_overflow":
        return (
            f"The data are beyond even float32: the float32 twin's loss is "
            f"{report.float32_initial_loss:.6g} before the step, so neither path can train. "
            "Lower input_scale or target_scale."
        )
    if code == "forward_overflow":
        return (
            f"The {dtype} forward pass overflows on its own, before any loss scaling: the "
            f"{dtype} loss is {report.mixed_initial_loss:.6g} (then {report.mixed_new_loss:.6g}) "
            f"where float32's is {report.float32_initial_loss:.6g} (then "
            f"{report.float32_new_loss:.6g}), past {forward}'s largest value "
            f"{dtype_facts(forward).max:.4g}. No loss scale helps here; smaller data or "
            "bfloat16's wider range do."
        )
    if code == "scaled_gradient_overflow":
        return (
            f"A fixed loss scale of {config.loss_scale:.6g} is too large here: the scaled "
            f"gradients overflowed {gradient} and reached the update unchanged, which is what "
            "dynamic loss scaling detects and skips."
        )
    if code == "gradient_underflow":
        flushed = _flushed_in_both(report)
        if flushed:
            names = " and ".join(p.name for p in flushed)
            sentence = (
                f"Every {names} gradient entry is exactly zero in both paths: the exact values "
                "lie below float32's smallest normal number "
                f"({dtype_facts('float32').smallest_normal:.3g}), and this backend flushes "
                "subnormal results to zero, so the float32 twin loses them too."
            )
            if report.float32_initial_loss == 0:
                sentence += " The losses read 0 for the same reason."
            return sentence
        lost = sum(p.underflow_count for p in report.params.values())
        # Current scaling fits every tensor to its format whatever S is (delayed scaling's
        # first step uses scale 1, like none, so S still matters there).
        if report.float8 and config.fp8_scaling == "current":
            return (
                f"{lost:,} gradient entries came out as zero that are not zero in float32. "
                "Current scaling already fits each tensor's largest entry to its format, so a "
                "loss scale cannot lift them: the float8 roundings themselves lost them (an "
                "entry flushed next to its tensor's largest, or a forward value rounded to zero)."
            )
        return (
            f"A loss scale of {config.loss_scale:.6g} is too small for {gradient}'s range: "
            f"{lost:,} gradient entries came out as zero that are not zero in float32 (values "
            f"at or below {dtype_facts(gradient).smallest_subnormal / 2:.3g} round to zero in "
            f"{gradient}). A larger scale lifts them into range."
        )
    return (
        f"The learning rate {config.lr:.6g} is too large for this data: the float32 twin's loss "
        f"goes from {report.float32_initial_loss:.6g} to {report.float32_new_loss:.6g}, so the "
        "step diverges in any precision."
    )


def reading(report: StepReport) -> list[str]:
    """A few sentences that interpret the report for a reader new to mixed precision.

    Every cause of ``causes(report)`` gets its own sentence, after the general ones.
    """
    dtype, chosen = report.config.compute_dtype, recipe(report.config.compute_dtype)
    facts = dtype_facts(chosen.forward_format)  # float8: E4M3's digits, the forward format's
    digits = agreeing_digits(report.mixed_new_loss, report.float32_new_loss)
    flushed = {p.name for p in _flushed_in_both(report)}
    agreement = (
        f"they agree to {digits:.1f} significant digits, while {facts.name} itself keeps "
        f"about {facts.decimal_digits:.1f}"
        if math.isfinite(report.mixed_new_loss) and math.isfinite(report.float32_new_loss)
        else "one of them is not a finite number, so they cannot be compared digit by digit"
    )
    if flushed:
        agreement += ", but only because both gradients were flushed to zero (see below)"
    sentences = [
        (
            f"After one step the {dtype} mixed-precision loss is {report.mixed_new_loss:.6g} "
            f"and the float32 loss is {report.float32_new_loss:.6g}: {agreement}."
        )
    ]
    if math.isfinite(report.mixed_new_loss) and math.isfinite(report.mixed_initial_loss):
        lowered = report.mixed_new_loss < report.mixed_initial_loss
        direction = "lowered" if lowered else "did not lower"
        sentences.append(
            f"The mixed step {direction} its loss (from {report.mixed_initial_loss:.6g} to "
            f"{report.mixed_new_loss:.6g})."
        )
    sentences += float8_sentences(report)
    for param in report.params.values():
        sentences.append(_param_sentence(param, chosen.gradient_format, param.name in flushed))
    for activation in report.activations:
        if activation.zero_count:
            sentences.append(
                f"{activation.zero_share:.1%} of hidden layer {activation.layer + 1}'s "
                f"activation-gradient entries are exactly zero in {dtype} before unscaling: "
                "they shrank below its range on the way back through the layers (the effect loss "
                "scaling exists for)."
            )
    sentences += [_cause_sentence(code, report) for code in causes(report)]
    # A loss is a mean of squared residuals; the flushed ones each lose less than float32's
    # smallest normal, which shows in the 6 digits printed once the loss is under 10^6 times it.
    tiny = dtype_facts("float32").smallest_normal
    losses = (report.mixed_initial_loss, report.mixed_new_loss)
    losses += (report.float32_initial_loss, report.float32_new_loss)
    if any(0 < loss < tiny * 1e6 for loss in losses) and subnormals_flushed_here("float32"):
        sentences.append(
            f"These losses lie near float32's smallest normal number ({tiny:.3g}): some of "
            "their squared residuals may lie below it, where this backend flushes them to zero, "
            "and each compiled program (the report's, the exercise's eager and jitted step) "
            f"flushes its own set, so a loss can differ by up to {tiny:.3g} between them."
        )
    lost = sum(p.lost_update_count for p in report.params.values())
    if lost:
        sentences.append(
            f"{lost:,} parameter updates were rounded away entirely: the optimizer's update was "
            "smaller than half the float32 spacing at that parameter (or exactly half, rounded "
            "to even)."
        )
    return sentences


def _param_sentence(param: ParamReport, dtype: str, flushed: bool) -> str:
    facts = dtype_facts(dtype)
    if flushed:
        return f"The {param.name} gradient is all zero in both paths (flushed to zero)."
    sentence = (
        f"The {param.name} gradient differs from float32 by {param.norm_rel_error:.3g} in "
        "relative norm"
    )
    if param.underflow_count:
        sentence += (
            f"; {param.underflow_count:,} of {param.size:,} entries are exactly zero in the "
            "mixed gradient but not in float32 (rounded or flushed to zero; "
            f"{dtype}'s smallest subnormal is {facts.smallest_subnormal:.3g})"
        )
    if param.nonfinite_scaled_count:
        infinite = int(np.isinf(param.scaled_grads).sum())
        undefined = int(np.isnan(param.scaled_grads).sum())
        sentence += (
            f"; {param.nonfinite_scaled_count:,} of {param.size:,} scaled entries are not "
            f"finite: {infinite:,} inf (past {dtype}'s largest value, {facts.max:.4g}) and "
            f"{undefined:,} NaN (inf - inf or 0 x inf further back in the backward pass)"
        )
    return sentence + "."
