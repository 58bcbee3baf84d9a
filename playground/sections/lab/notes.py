"""What to notice in the lab's charts: a sentence or two computed from the numbers they draw.

Rule: every count and share is read from the report or the sweep; nothing is typed in.

    magnitude_note(report)   the magnitude figure: what the loss scale did to the entries lost
                             to zero, subnormal or non-finite (the counts beside it)
    activation_note(report)  the activation chart's subtitle: the layer with most exact zeros
                             and any non-finite entries
    sweep_gap_notes(sweep)   the sweep chart: where a curve has no point (inf or NaN), a note at
                             that place naming the first such scale and why
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from playground.core.formats.dtypes import dtype_facts
from playground.core.recipes.block_formats import (
    E8M0_MAX_EXPONENT,
    E8M0_MIN_EXPONENT,
    BlockRecipe,
    element_facts,
)
from playground.core.recipes.registry import recipe
from playground.core.runs.sweep import SweepReport
from playground.core.step.report import StepReport
from playground.sections.step.causes import causes, unfit_scale
from playground.views.plotly import WARNING_TEXT_COLOR, true_runs


def magnitude_scale(loss_scale: float) -> str:
    """A loss scale as the lab writes it: 2^10, or 1000 (2^9.97)."""
    exponent = math.log2(loss_scale)
    return f"2^{exponent:g}" if exponent.is_integer() else f"{loss_scale:g} (2^{exponent:.3g})"


def _share(count: int, total: int) -> str:
    return f"{count / total:.1%} ({count:,})"


def magnitude_note(report: StepReport) -> str:
    """One or two sentences on the magnitude figure (see the module rule)."""
    counts = report.magnitudes
    total = counts["entries"]["total"]
    unscaled, scaled = counts["before scaling"], counts["after scaling"]
    chosen = recipe(report.config.compute_dtype)
    if chosen.block is not None:
        return block_magnitude_note(report)
    dtype = chosen.gradient_format
    scale = magnitude_scale(report.config.loss_scale)
    if scaled["non-finite"]:
        share = _share(scaled["non-finite"], total)
        unfit = unfit_scale(report)
        if unfit:  # S itself, not the gradients, is past the loss dtype's range
            return (
                f"At S = {scale}, {share} of the scaled gradient entries are inf or NaN: S "
                f"itself does not fit in {unfit} (largest {dtype_facts(unfit).max:g}), the "
                f"dtype of this step's loss, so the backward pass starts from inf. torch's "
                "GradScaler keeps S and the autocast loss in float32, where it fits."
            )
        found = causes(report)
        if "data_overflow" in found or "forward_overflow" in found:
            return (
                f"{share} of the scaled gradient entries are inf or NaN because the forward "
                "pass already overflowed, before any scaling: no loss scale changes that."
            )
        return (
            f"At S = {scale}, {share} of the scaled gradient entries overflow {dtype} "
            f"(largest {dtype_facts(dtype).max:g}) and land in the inf/NaN bar at the right: "
            "this scale is too large for them; a smaller one keeps them finite."
        )
    lost_before, lost_after = unscaled["lost to zero"], scaled["lost to zero"]
    if lost_after < lost_before:
        return (
            f"Without scaling, {_share(lost_before, total)} of the entries would be lost to zero "
            f"in {dtype}; scaled by S = {scale}, the bars sit log2 S binades further right and "
            f"{_share(lost_after, total)} are."
        )
    if lost_after > lost_before:
        return (
            f"At S = {scale}, {_share(lost_after, total)} of the entries come out exactly zero "
            f"where float32's are not, against {_share(lost_before, total)} for float32's "
            f"gradient cast to {dtype}: a rounding inside the low-precision backward pass, not "
            f"{dtype}'s range, lost them."
        )
    if lost_after:
        return (
            f"{_share(lost_after, total)} of the entries fall left of {dtype}'s subnormal band "
            f"and become zero at S = {scale}: a larger loss scale moves the bars right, out of "
            "the red band."
        )
    if scaled["subnormal"]:
        return (
            f"No entry is lost, but {_share(scaled['subnormal'], total)} sit in {dtype}'s "
            "subnormal band, where fewer significant bits remain."
        )
    return (
        f"Every entry lands in {dtype}'s normal range at S = {scale}: nothing is lost to zero "
        "or to overflow, so the scale changes where the bars sit, not what they keep."
    )


def block_range(spec: BlockRecipe) -> str:
    """What a block of ``spec`` holds, from its formats' limits: the share of its largest entry
    below which an entry is lost, and how far its scale reaches."""
    element = element_facts(spec.element_format)
    within = 2 * element.max / element.smallest_subnormal  # amax sits at about the max
    if spec.power_of_two_scales:  # a power-of-two scale puts amax between max / 2 and max
        share = f"1/{within:,.0f} to 1/{within / 2:,.0f}"
    else:
        share = f"about 1/{within:,.0f}"
    sentence = (
        f"a block keeps an entry unless it is below {share} of the block's largest "
        f"({spec.element_format}'s max, {element.max:g}, over half its smallest subnormal, "
        f"{element.smallest_subnormal:.3g})"
    )
    if spec.power_of_two_scales:
        return sentence + (
            f", and its {spec.scale_format} scale reaches 2^{E8M0_MIN_EXPONENT} to "
            f"2^{E8M0_MAX_EXPONENT}, far beyond any gradient"
        )
    if spec.two_level:
        # A block scale amax_block / tensor_scale / max is 448 amax_block / amax_tensor in E4M3:
        # it rounds to zero below half E4M3's smallest subnormal.
        scale = element_facts(spec.scale_format)
        floor = scale.smallest_subnormal / 2 / scale.max
        return sentence + (
            f"; its {spec.scale_format} block scale, times a float32 tensor scale, holds blocks "
            f"down to about 2^{math.log2(floor):.1f} of the tensor's largest entry (a block "
            "below that is stored as zeros)"
        )
    return sentence + ", and its float32 scale reaches float32's whole range"


def block_magnitude_note(report: StepReport) -> str:
    """A block recipe's magnitude note: its block range, what it lost at S = 1 and at this S,
    and loss scaling for what it is here."""
    spec = recipe(report.config.compute_dtype).block
    counts = report.magnitudes
    total = counts["entries"]["total"]
    unscaled, scaled = counts["before scaling"], counts["after scaling"]
    scale = magnitude_scale(report.config.loss_scale)
    sentence = (
        f"In {spec.name}, {block_range(spec)}. Stored this way, float32's gradient loses "
        f"{_share(unscaled['lost to zero'], total)} of its entries to zero and saturates "
        f"{_share(unscaled['saturated'], total)}; the scaled gradient of this step at S = "
        f"{scale}, {_share(scaled['lost to zero'], total)} and "
        f"{_share(scaled['saturated'], total)}."
    )
    return sentence + (
        " Loss scaling does not change this: multiplying the loss by S multiplies each block's "
        "largest entry by S too and its scale follows, so the entries sit at the same place in "
        "their blocks at any S (the columns differ only because the scaled gradient comes from "
        f"{spec.name}'s own backward pass). The block scales do the job a loss scale does for "
        "float16."
    )


def activation_note(report: StepReport) -> str:
    """The activation chart's subtitle: where the zeros and non-finite entries are."""
    layers = report.activations
    if not layers:
        return ""
    most = max(layers, key=lambda a: a.zero_share)
    sentence = f"most exact zeros: layer {most.layer + 1}, {most.zero_share:.1%}"
    nonfinite = sum(a.nonfinite_count for a in layers)
    if nonfinite:
        first = next(a for a in layers if a.nonfinite_count)
        sentence += (
            f"; {nonfinite:,} entries inf or NaN from layer {first.layer + 1} "
            "(drawn at the right, not in a binade)"
        )
    return sentence


def _first_gap(values: np.ndarray, exponents: np.ndarray) -> tuple[int, int] | None:
    """The first run of exponents where ``values`` is not finite, as (first, last)."""
    runs = true_runs(~np.isfinite(values))
    return (int(exponents[runs[0][0]]), int(exponents[runs[0][1]])) if runs else None


def sweep_gap_notes(sweep: SweepReport) -> list[dict[str, Any]]:
    """Plotly annotations where the sweep's error or new-loss curve has no point, saying why."""
    dtype = sweep.config.compute_dtype
    overflowing = bool(np.any(sweep.nonfinite_share > 0))
    why = f"scaled gradients overflow {dtype}" if overflowing else "the step is not finite"
    middle = sweep.exponents[len(sweep.exponents) // 2]
    notes = []
    for curve, axis in ((sweep.rel_error, "y"), (sweep.new_loss, "y3")):
        gap = _first_gap(curve, sweep.exponents)
        if gap is None:
            continue
        first, last = gap
        where = f"from 2^{first}" if last == sweep.exponents[-1] else f"at 2^{first} to 2^{last}"
        notes.append(
            {
                "x": first,
                "y": 0.5,
                "xref": "x",
                "yref": f"{axis} domain",
                "xanchor": "right" if first > middle else "left",
                "text": f"no point {where}: {why}",
                "showarrow": False,
                "font": {"color": WARNING_TEXT_COLOR, "size": 12},
            }
        )
    return notes
