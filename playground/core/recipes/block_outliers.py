"""Outliers in the batch, and the shares of x they cost under one scale per tensor or per block.

Rule (``add_outliers``): with ``count = max(1, round(outlier_share x size))`` when
outlier_share > 0 (else 0), ``count`` distinct entries of x, drawn by numpy's PCG64 from
``seed``, are multiplied by ``outlier_scale`` (sign kept, magnitude scaled); the rest of x is
unchanged. outlier_share is in [0, 0.01], outlier_scale in [2^0, 2^16].

The outlier lesson (``core.lessons.blocks``) compares x under one scale per tensor and per
block with the shares below: ``lost_share`` (flushed or subnormal) and ``normal_share``.
"""

from __future__ import annotations

import numpy as np

from playground.core.recipes.block_stats import OperandStats

OUTLIER_SHARE_MAX = 0.01
OUTLIER_SCALE_MIN, OUTLIER_SCALE_MAX = 2.0**0, 2.0**16


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
