"""Why a step's numbers are non-finite or degenerate: the causes the reading names.

Rule::

    causes(report)                the codes of CAUSES whose condition holds, in that order
    cause_sentence(code, report)  one sentence per code, from the report's numbers
    forward_failure(report)       the first non-finite operation of the mixed forward pass,
                                  and why, from its kind and its dtype's largest (``WHY``)
    unfit_scale(report)           the loss's dtype when S itself does not fit in it (the
                                  backward pass starts from S cast to that dtype: inf)
    flush_margin(report)          how far two programs' losses may differ by flushing alone:
                                  a difference that small is never called a cause
"""

from __future__ import annotations

import math

import numpy as np

from playground.core.formats.dtypes import cast, dtype_facts, subnormals_flushed_here
from playground.core.model.losses import LOSS_NAMES
from playground.core.recipes.registry import recipe
from playground.core.step.policy import policy_for
from playground.core.step.report import ParamReport, StepReport

CAUSES = (
    "data_overflow",
    "forward_overflow",
    "scaled_gradient_overflow",
    "gradient_underflow",
    "lr_divergence",
)


# Why an operation's result is not finite while every earlier one's was: each operation casts its
# inputs to its kind's dtype on entry (core.model.op_policy), so a value past that dtype's largest
# one is a cast operand or its own arithmetic. A layer norm's result is within sqrt(width) of its
# bias at the step's initial scale 1 when its variance is finite, so its check fails through the
# variance: the mean of squares E[x^2], whose squares overflow once |x| passes sqrt(max). A loss
# is named by what it holds in its dtype: the MSE its squared residuals, the max-subtracted
# softmax cross-entropy each logit minus its row's largest.
WHY = {
    "matmul": lambda dtype, top: f"a {dtype} matmul operand or sum of products past {top:.6g}",
    "normalisation": lambda dtype, top: (
        f"a {dtype} variance past {top:.6g} (its inputs' squares pass it once |x| passes "
        f"{math.sqrt(top):.4g})"
    ),
    "activation": lambda dtype, top: f"a {dtype} activation input or result past {top:.6g}",
    # A score is a sum of d_head products of q and k, so it passes the largest value long
    # before q and k do; the softmax and the values it weighs stay within their inputs' range.
    "attention": lambda dtype, top: (
        f"a {dtype} attention score (q / sqrt(d_head)) . k, or a value it weighs, past {top:.6g}"
    ),
    LOSS_NAMES["regression"]: lambda dtype, top: (
        f"a {dtype} squared residual past {top:.6g} (once a residual passes {math.sqrt(top):.4g})"
    ),
    LOSS_NAMES["classification"]: lambda dtype, top: (
        f"a {dtype} logit minus its row's largest past {top:.6g} in magnitude"
    ),
}


def forward_failure(report: StepReport) -> dict[str, str] | None:
    """The first operation of the mixed step's initial forward pass whose result was not
    finite: its ``operation`` name, ``kind``, the ``dtype`` its result is held in (the precision
    policy's dtype of its kind) and ``why`` (``WHY`` of its kind, or of its name for a loss,
    from that dtype's largest value); None when every result was finite."""
    name = report.first_nonfinite["forward"]
    if name is None:
        return None
    kind = next(row.kind for row in report.operations if row.name == name)
    dtype = policy_for(report.config).op_dtype(kind)
    why = WHY[name if kind == "loss" else kind](dtype, dtype_facts(dtype).max)
    return {"operation": name, "kind": kind, "dtype": dtype, "why": why}


def unfit_scale(report: StepReport) -> str | None:
    """The dtype the loss is computed in when the loss scale S cast to it is inf, else None.

    The backward pass of ``S * float32(loss)`` starts from S and, through the loss's cast, hands
    S on in the loss's dtype: in the exercise the loss is float16 under float16, so S = 2^16
    (past 65504) becomes inf there and every scaled gradient is inf or NaN, however small the
    gradients are. torch's autocast computes the loss in float32 and GradScaler keeps its scale
    in float32, which is why GradScaler can start at 2^16 (``precision_policy="autocast"``).

    Args:
      report: a step's report.

    Returns:
      The loss's dtype name, or None when S is finite in it.
    """
    dtype = policy_for(report.config).loss_dtype
    scale = np.asarray(report.config.loss_scale, np.float32)
    return dtype if not np.isfinite(cast(scale, dtype).astype(np.float32)) else None


def flushed_in_both(report: StepReport) -> list[ParamReport]:
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


def flush_margin(report: StepReport) -> float:
    """How far two compiled programs' losses may differ by flushing alone: float32's smallest
    normal number when a loss lies within 10^6 of it on a backend that flushes subnormals (its
    squared residuals may lie below it, and each program flushes its own set), else 0."""
    tiny = dtype_facts("float32").smallest_normal
    losses = (report.mixed_initial_loss, report.mixed_new_loss)
    losses += (report.float32_initial_loss, report.float32_new_loss)
    near = any(0 < loss < tiny * 1e6 for loss in losses)
    return tiny if near and subnormals_flushed_here("float32") else 0.0


def causes(report: StepReport) -> list[str]:
    """Which of CAUSES explain this report's non-finite or degenerate numbers, in that order.

    With ``forward_finite`` = every operation of the mixed forward pass and its initial loss
    are finite::

        data_overflow             float32's initial loss is not finite
        forward_overflow          float32's initial loss is finite, and not forward_finite,
                                  or the mixed loss after the step is not finite while
                                  float32's and the mixed parameters are
        scaled_gradient_overflow  forward_finite and some scaled gradient is not finite
        gradient_underflow        forward_finite and some entry is 0 in mixed_grads only,
                                  or a parameter's gradient is all 0 on both paths
                                  (``flushed_in_both``)
        lr_divergence             lr > 0, float32's initial loss is finite and its new loss
                                  is not <= initial + ``flush_margin``

    Every operation is checked, not only the loss, because a layer norm whose variance is inf
    passes a finite loss on; a failed forward pass computes other values, whose zeros are not
    underflow; a rise within ``flush_margin`` is flushing, not divergence.
    """
    mixed_initial, mixed_new = report.mixed_initial_loss, report.mixed_new_loss
    float32_initial, float32_new = report.float32_initial_loss, report.float32_new_loss
    params = report.params.values()
    finite_after = all(np.all(np.isfinite(p.mixed_after)) for p in params)
    forward_finite = report.first_nonfinite["forward"] is None and math.isfinite(mixed_initial)
    found = {
        "data_overflow": not math.isfinite(float32_initial),
        "forward_overflow": math.isfinite(float32_initial)
        and (
            not forward_finite
            or (math.isfinite(float32_new) and not math.isfinite(mixed_new) and finite_after)
        ),
        "scaled_gradient_overflow": forward_finite
        and any(p.nonfinite_scaled_count for p in params),
        "gradient_underflow": (forward_finite and any(p.underflow_count for p in params))
        or bool(flushed_in_both(report)),
        "lr_divergence": report.config.lr > 0
        and math.isfinite(float32_initial)
        and not float32_new <= float32_initial + flush_margin(report),
    }
    return [code for code in CAUSES if found[code]]


def cause_sentence(code: str, report: StepReport) -> str:
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
        losses = (
            f"the {dtype} loss is {report.mixed_initial_loss:.6g} (then "
            f"{report.mixed_new_loss:.6g}) where float32's is {report.float32_initial_loss:.6g} "
            f"(then {report.float32_new_loss:.6g})"
        )
        failure = forward_failure(report)
        if failure:
            found = (
                f"inf or NaN first appears in {failure['operation']}, {failure['why']}; {losses}"
            )
        else:
            found = f"{losses}, past {forward}'s largest value {dtype_facts(forward).max:.4g}"
        return (
            f"The {dtype} forward pass overflows on its own, before any loss scaling: {found}. "
            "No loss scale helps here; smaller data or bfloat16's wider range do."
        )
    if code == "scaled_gradient_overflow":
        unfit = unfit_scale(report)
        if unfit:
            return (
                f"The loss scale S = {config.loss_scale:.6g} does not fit in {unfit} (largest "
                f"{dtype_facts(unfit).max:g}), the dtype this step computes its loss in: the "
                f"backward pass starts from S cast to {unfit}, which overflowed to inf, so every "
                "scaled gradient is inf or NaN, not because the gradients are large. torch's "
                "autocast keeps the loss and GradScaler's scale in float32, where 2^16 fits "
                "(precision_policy=autocast)."
            )
        return (
            f"A fixed loss scale of {config.loss_scale:.6g} is too large here: the scaled "
            f"gradients overflowed {gradient} and reached the update unchanged, which is what "
            "dynamic loss scaling detects and skips."
        )
    if code == "gradient_underflow":
        flushed = flushed_in_both(report)
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
        if report.blocks is not None:  # block scales fit each block's largest entry
            return (
                f"{lost:,} gradient entries came out as zero that are not zero in float32. "
                "Each block's own scale already fits its largest entry to the format, so a loss "
                "scale cannot lift them: the block roundings themselves lost them (an entry "
                "flushed next to its block's largest, or a forward value rounded to zero)."
            )
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
