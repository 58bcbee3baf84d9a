"""Outliers in the batch, and the lesson they teach: one scale per tensor against per block.

Rule (``add_outliers``): with ``count = max(1, round(outlier_share x size))`` when
outlier_share > 0 (else 0), ``count`` distinct entries of x, drawn by numpy's PCG64 from
``seed``, are multiplied by ``outlier_scale`` (sign kept, magnitude scaled); the rest of x is
unchanged. outlier_share is in [0, 0.01], outlier_scale in [2^0, 2^16].

The lesson (``outlier_lesson``): an outlier sets per-tensor float8's scale, s = 448 / amax, so
every entry far below it lands in E4M3's subnormals (fewer significant bits) or at zero; MXFP8
scales each block of 32 by its own amax, so only the outlier's own blocks suffer. Its claim
holds when, of x's nonzero entries,

    per-tensor float8 (current scaling) flushes or leaves subnormal more than half, and
    MXFP8 keeps at least 90% as normal E4M3 numbers (neither flushed, saturated nor subnormal).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from playground.core.recipes.block_formats import MXFP8
from playground.core.recipes.block_stats import (
    OperandStats,
    per_tensor_float8_stats,
    recipe_operand_stats,
)

OUTLIER_SHARE_MAX = 0.01
OUTLIER_SCALE_MIN, OUTLIER_SCALE_MAX = 2.0**0, 2.0**16
# The lesson's thresholds: "most" of x lost per tensor; MXFP8 keeps nearly all of it.
PER_TENSOR_LOST_MIN = 0.5
MXFP8_NORMAL_MIN = 0.9


def outlier_count(size: int, outlier_share: float) -> int:
    """How many entries of a tensor of ``size`` become outliers (see the rule)."""
    if not 0 <= outlier_share <= OUTLIER_SHARE_MAX:
        raise ValueError(
            f"outlier_share must be between 0 and {OUTLIER_SHARE_MAX}; got {outlier_share}"
        )
    return max(1, round(outlier_share * size)) if outlier_share > 0 else 0


def add_outliers(
    x: np.ndarray, outlier_share: float, outlier_scale: float, seed: int
) -> np.ndarray:
    """A copy of ``x`` (float32) with outliers put in by the module rule."""
    if not OUTLIER_SCALE_MIN <= outlier_scale <= OUTLIER_SCALE_MAX:
        raise ValueError(f"outlier_scale must be between 2^0 and 2^16; got {outlier_scale}")
    x = np.array(x, np.float32)
    count = outlier_count(x.size, outlier_share)
    chosen = np.random.default_rng(seed).choice(x.size, size=count, replace=False)
    flat = x.reshape(-1)
    flat[chosen] *= np.float32(outlier_scale)
    return x


def lost_share(stats: OperandStats) -> float:
    """Share of the nonzero entries flushed to zero or stored as subnormals."""
    return (stats.counts["flushed"] + stats.subnormal) / stats.nonzero


def normal_share(stats: OperandStats) -> float:
    """Share of the nonzero entries stored as normal numbers (kept, not subnormal)."""
    return (stats.counts["kept"] - stats.subnormal) / stats.nonzero


class OutlierLesson(NamedTuple):
    """The lesson's sentence, the condition it rests on (with its numbers), and whether it
    holds: the fields of ``core.lessons.claim.Claim``, in its order."""

    sentence: str
    condition: str
    holds: bool


def outlier_lesson(x: np.ndarray) -> OutlierLesson:
    """The lesson's claim about ``x``, written from its measured shares (see the rule)."""
    return lesson_from(per_tensor_float8_stats(x), recipe_operand_stats(x, MXFP8, "input"))


def lesson_from(per_tensor_stats: OperandStats, mxfp8_stats: OperandStats) -> OutlierLesson:
    """The lesson's claim from x's statistics already measured: under per-tensor float8
    (``block_stats.per_tensor_float8_stats``) and as MXFP8 quantizes an input (a report has
    both, so x is not quantized again)."""
    per_tensor = lost_share(per_tensor_stats)
    mxfp8 = normal_share(mxfp8_stats)
    tests = (
        (
            f"per-tensor float8 lost {per_tensor:.1%} > {PER_TENSOR_LOST_MIN:.0%}",
            per_tensor > PER_TENSOR_LOST_MIN,
        ),
        (
            f"MXFP8 kept {mxfp8:.1%} as normal numbers >= {MXFP8_NORMAL_MIN:.0%}",
            mxfp8 >= MXFP8_NORMAL_MIN,
        ),
    )
    sentence = (
        f"Per-tensor float8 (one scale, set by the largest entry) flushes to zero or leaves as "
        f"subnormals {per_tensor:.1%} of x's nonzero entries; MXFP8 (one scale per 32 "
        f"values) keeps {mxfp8:.1%} of them as normal E4M3 numbers."
    )
    return OutlierLesson(sentence, "; ".join(text for text, _ in tests), all(ok for _, ok in tests))
