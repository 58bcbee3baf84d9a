"""The block-scaling lesson: one outlier in x against one scale per tensor, and per block.

Rule: an outlier sets per-tensor float8's scale, s = 448 / amax, so every entry far below it
lands in E4M3's subnormals (fewer significant bits) or at zero; MXFP8 scales each block of 32
by its own amax, so only the outlier's own blocks suffer. The claim holds when, of x's nonzero
entries,

    per-tensor float8 (current scaling) flushes or leaves subnormal more than half, and
    MXFP8 keeps at least 90% as normal E4M3 numbers (neither flushed, saturated nor subnormal).

On a step, x's statistics are the ones its block report measured (``StepReport.blocks``); a
step whose recipe is not block-scaled has no block report, and the claim does not hold there.

Its figures (``scale_figures``) are the two scales of the same tensor: the per-tensor one and
the map of per-block ones (log2 of the factor an element is multiplied by to give the value),
the outlier's blocks (the ones of the largest scales), and the two shares the sentence quotes.
"""

from __future__ import annotations

import numpy as np

from playground.core.lessons.claim import Claim, checked
from playground.core.recipes.block_formats import MXFP8
from playground.core.recipes.block_outliers import lost_share, normal_share
from playground.core.recipes.block_stats import (
    OperandStats,
    per_tensor_float8_stats,
    recipe_operand_stats,
)
from playground.core.step.report import StepReport

# One outlier (the share's count rounds up to one entry of the default 256 x 64 batch), 2^16
# times the rest, under MXFP8.
ONE_OUTLIER = {"compute_dtype": "mxfp8", "outlier_share": 1e-5, "outlier_scale": 2.0**16}
# The lesson's thresholds: "most" of x lost per tensor; MXFP8 keeps nearly all of it.
PER_TENSOR_LOST_MIN = 0.5
MXFP8_NORMAL_MIN = 0.9


# The route's form of the claim (no figures: the picture carries them).
SHORT = (
    "One outlier sets the single scale of per-tensor float8 (torchao's tensorwise recipe), so "
    "most of x falls to zero or to subnormals. MXFP8 gives each block its own scale and keeps "
    "nearly all of x as normal numbers."
)


def scale_figures(
    per_tensor_stats: OperandStats, mxfp8_stats: OperandStats, tensor: str = "x"
) -> dict:
    """The figures of one tensor's two scalings (see the module rule): the ``tensor``'s name,
    the block ``recipe``'s (as the page writes it), ``per_tensor_log2``, ``block_log2`` (rows
    by blocks of ``block`` values), ``outlier_blocks``
    ((row, block) pairs: the blocks the outlier scales, those whose log2 scale is past the
    midpoint between the median block's and the largest), ``per_tensor_lost`` and
    ``block_normal`` (shares of the nonzero entries)."""
    block_log2 = np.asarray(mxfp8_stats.scale_log2, np.float64)
    midpoint = (np.nanmedian(block_log2) + np.nanmax(block_log2)) / 2
    return {
        "tensor": tensor,
        "recipe": MXFP8.name.upper(),
        "block": MXFP8.block,
        "per_tensor_log2": float(np.asarray(per_tensor_stats.scale_log2).item()),
        "block_log2": block_log2,
        "outlier_blocks": tuple(map(tuple, np.argwhere(block_log2 > midpoint).tolist())),
        "per_tensor_lost": lost_share(per_tensor_stats),
        "block_normal": normal_share(mxfp8_stats),
    }


def claim_from(per_tensor_stats: OperandStats, mxfp8_stats: OperandStats) -> Claim:
    """The claim from x's statistics under per-tensor float8
    (``block_stats.per_tensor_float8_stats``) and as MXFP8 quantizes an input."""
    per_tensor = lost_share(per_tensor_stats)
    mxfp8 = normal_share(mxfp8_stats)
    sentence = (
        f"Per-tensor float8 (one scale, set by the largest entry) flushes to zero or leaves as "
        f"subnormals {per_tensor:.1%} of x's nonzero entries; MXFP8 (one scale per 32 "
        f"values) keeps {mxfp8:.1%} of them as normal E4M3 numbers."
    )
    return checked(
        sentence,
        [
            (
                f"per-tensor float8 lost {per_tensor:.1%} > {PER_TENSOR_LOST_MIN:.0%}",
                per_tensor > PER_TENSOR_LOST_MIN,
            ),
            (
                f"MXFP8 kept {mxfp8:.1%} as normal numbers >= {MXFP8_NORMAL_MIN:.0%}",
                mxfp8 >= MXFP8_NORMAL_MIN,
            ),
        ],
        short=SHORT,
        figures=scale_figures(per_tensor_stats, mxfp8_stats),
    )


def outlier_lesson(x: np.ndarray) -> Claim:
    """The claim about ``x`` itself, its statistics measured here (see the rule)."""
    return claim_from(per_tensor_float8_stats(x), recipe_operand_stats(x, MXFP8, "input"))


def outlier_claim(report: StepReport) -> Claim:
    """The lesson's claim on ``report`` (see the rule)."""
    if report.blocks is None:
        return Claim("", f"{report.config.compute_dtype} is not a block-scaled recipe", False)
    return claim_from(report.blocks.per_tensor["input"], report.blocks.mxfp8_input)
