"""A StepReport as a JSON-able dict and as a few plain-language sentences.

Rule: every number here is read from the report or from the dtype registry; nothing is typed in.
Non-finite floats become the documented strings of ``views.numbers.json_number``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from playground.core.formats.dtypes import dtype_facts
from playground.core.recipes.registry import recipe, recipe_summaries
from playground.core.settings.settings import StepConfig
from playground.core.step.error_ranking import (
    LAYER,
    NEAR_ZERO,
    RELATIVE,
    RankedError,
    error_ranking,
)
from playground.core.step.policy import policy_for
from playground.core.step.report import LOG2_LOW, ActivationReport, ParamReport, StepReport
from playground.sections.step.accumulation import accumulation_sentences, accumulation_summary
from playground.sections.step.blocks import recipe_comparison
from playground.sections.step.causes import (
    cause_sentence,
    causes,
    flush_margin,
    flushed_in_both,
    forward_failure,
)
from playground.sections.step.float8_summary import float8_sentences
from playground.sections.step.operations import operation_losses, operations_summary
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

    Args:
      report: a StepReport from ``run_report``.
      sentences: ``reading(report)``, when the caller has it already (else computed here).

    Returns:
      A dict with ``config``, ``losses`` (``mixed_initial``, ``mixed_new``, ``float32_initial``,
      ``float32_new``, ...), ``params`` (per parameter statistics) and ``reading`` (sentences),
      among others; strict JSON (no NaN or Infinity).
    """
    ranking = error_ranking(report.params.values())
    ranked = {entry.name: entry for entry in ranking}
    losses = {
        "mixed_initial": report.mixed_initial_loss,
        "mixed_new": report.mixed_new_loss,
        "float32_initial": report.float32_initial_loss,
        "float32_new": report.float32_new_loss,
        "new_difference": report.mixed_new_loss - report.float32_new_loss,
    }
    return {
        "config": report.config.to_dict(),
        "losses": {name: json_number(value) for name, value in losses.items()}
        | operation_losses(report),
        "agreeing_digits": round(
            agreeing_digits(report.mixed_new_loss, report.float32_new_loss), 2
        ),
        "params": {
            name: {stat: json_number(getattr(param, stat)) for stat in PARAM_STATS}
            | {"ranked_error": json_number(ranked[name].score), "ranked_by": ranked[name].by}
            for name, param in report.params.items()
        },
        "error_ranking": [entry.name for entry in ranking],
        "magnitudes": report.magnitudes,
        "activations": [activation_summary(a, report.config) for a in report.activations],
        **_json_floats(recipe_summaries(report)),  # by recipe name (float8: its tensors)
        "recipe_comparison": recipe_comparison(report),  # block recipes (sections.step.blocks)
        "causes": causes(report),
        "forward_failure": forward_failure(report),  # the first operation that overflowed
        "operations": operations_summary(report),
        "accumulation": accumulation_summary(report),  # sections.step.accumulation
        "reading": reading(report, ranking) if sentences is None else sentences,
    }


def _json_floats(tree: Any) -> Any:
    """``tree`` (dicts and lists) with every float as ``json_number`` writes it."""
    if isinstance(tree, dict):
        return {key: _json_floats(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [_json_floats(value) for value in tree]
    return json_number(tree) if isinstance(tree, float) else tree


def activation_summary(activation: ActivationReport, config: StepConfig) -> dict[str, Any]:
    """One hidden layer's activation gradient: its zero share and its log2 histogram::

        x          |g|, or for a block recipe |g| / its block's scale (``log2_histogram.of``)
        counts[i]  entries with floor(log2 x) == first + i, over the histogram's nonzero span
                   (empty when every entry is zero or non-finite)

    For a block recipe the bin at LOG2_LOW holds the entries whose block scale flushed to zero
    (``core.step.activation_counts``).
    """
    live = np.flatnonzero(activation.log2_counts)
    first, last = (int(live[0]), int(live[-1])) if live.size else (0, -1)
    block = recipe(config.compute_dtype).block
    of = "|g|" if block is None else f"|g| / its block's scale (blocks of {block.block})"
    return {
        "layer": activation.layer,
        "zero_share": activation.zero_share,
        "zero_count": activation.zero_count,
        "nonfinite_count": activation.nonfinite_count,
        "size": activation.size,
        "log2_histogram": {
            "first": LOG2_LOW + first,
            "counts": activation.log2_counts[first : last + 1].tolist(),
            "of": of,
        },
    }


def reading(report: StepReport, ranking: list[RankedError] | None = None) -> list[str]:
    """A few sentences that interpret the report for a reader new to mixed precision.

    Every cause of ``causes(report)`` gets its own sentence, after the general ones;
    ``ranking``: the report's ``error_ranking`` when the caller has it (else computed here).
    """
    dtype, chosen = report.config.compute_dtype, recipe(report.config.compute_dtype)
    facts = dtype_facts(chosen.forward_format)  # float8: E4M3's digits, the forward format's
    digits = agreeing_digits(report.mixed_new_loss, report.float32_new_loss)
    flushed = {p.name for p in flushed_in_both(report)}
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
    sentences += accumulation_sentences(report)
    if ranking is None:
        ranking = error_ranking(report.params.values())
    ranked = {entry.name: entry for entry in ranking}
    for param in report.params.values():
        sentences.append(
            _param_sentence(
                param, chosen.gradient_format, param.name in flushed, ranked[param.name]
            )
        )
    if len(ranking) > 2 and ranking[0].score > 0:
        sentences.append(ranking_sentence(ranking))
    held = policy_for(report.config).op_dtype("activation")
    for activation in report.activations:
        if not activation.zero_count:
            continue
        share = (
            f"{activation.zero_count:,} of the {activation.size:,} activation-gradient entries "
            f"of hidden layer {activation.layer + 1} ({activation.zero_share * 100:.3g}%)"
        )
        if held == "float32":  # a quantizing recipe or the policy keeps activations float32
            sentences.append(
                f"{share} are exactly zero before unscaling, held "
                "in float32 (this run keeps the activations in float32): zeros the model makes "
                "(a ReLU's inactive units, say) or that came back from the low-precision "
                "backward products."
            )
            continue
        sentences.append(
            f"{share} are exactly zero in {held} before unscaling: "
            "they shrank below its range on the way back through the layers (the effect loss "
            "scaling exists for)."
        )
    sentences += [cause_sentence(code, report) for code in causes(report)]
    # A loss is a mean of squared residuals; the flushed ones each lose less than float32's
    # smallest normal, which shows in the 6 digits printed once the loss is under 10^6 times it.
    tiny = flush_margin(report)
    if tiny:
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


def ranking_sentence(ranking: list[RankedError]) -> str:
    """Which gradient moved most (``core.step.error_ranking``), and why a near-zero one is
    measured against its layer."""
    first = ranking[0]
    measure = "of its own norm" if first.by == RELATIVE else "of its layer's gradient norm"
    sentence = (
        f"The gradient moved most by this step's precision: {first.name} "
        f"({first.score:.3g} {measure})"
    )
    near = [entry.name for entry in ranking if entry.by == LAYER]
    if near:
        sentence += (
            f"; {', '.join(near[:4])}{', ...' if len(near) > 4 else ''} "
            f"{'has' if len(near) == 1 else 'have'} a float32 gradient near zero (at most "
            f"{NEAR_ZERO:g} of its layer's), so {'it is' if len(near) == 1 else 'they are'} "
            "ranked by the error over the layer's gradient norm, not by a relative error over "
            "almost nothing"
        )
    return sentence + "."


def _param_sentence(
    param: ParamReport, dtype: str, flushed: bool, ranked: RankedError | None = None
) -> str:
    facts = dtype_facts(dtype)
    if flushed:
        return f"The {param.name} gradient is all zero in both paths (flushed to zero)."
    if ranked is not None and ranked.by == LAYER:
        sentence = (
            f"The float32 {param.name} gradient is near zero (at most {NEAR_ZERO:g} of its "
            f"layer's norm, {ranked.layer_scale:.3g}); the mixed one differs from it by "
            f"{ranked.error:.3g} in norm, {ranked.score:.3g} of the layer's"
        )
    else:
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
