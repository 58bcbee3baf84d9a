"""The block-scaling settings' ranges and help lines, appended to the settings table.

Rule: ``outlier_share`` and ``outlier_scale`` put a few large entries into the synthetic x
(``core.recipes.block_outliers.add_outliers``: share 0, the default, puts none, so every other
number
is as before); ``nvfp4_hadamard`` turns NVFP4's random Hadamard transform of the weight-gradient
matmul's inputs on (the recipe's default) or off. Limits come from ``core.recipes.block_outliers``.
"""

from __future__ import annotations

from playground.core.bounds import Bounds
from playground.core.recipes.block_outliers import (
    OUTLIER_SCALE_MAX,
    OUTLIER_SCALE_MIN,
    OUTLIER_SHARE_MAX,
)

HADAMARD_CHOICES = ("on", "off")
# The block-scaling settings, in the settings table's order.
FIELDS = ("outlier_share", "outlier_scale", "nvfp4_hadamard")

OUTLIER_SHARE = Bounds(
    "outlier share",
    0.0,
    OUTLIER_SHARE_MAX,
    "Share of x's entries multiplied by the outlier scale (at least one when above 0), drawn "
    "from the data seed: one scale per tensor is set by them, one per block only near them.",
    group="data",
)
OUTLIER_SCALE = Bounds(
    "outlier scale",
    OUTLIER_SCALE_MIN,
    OUTLIER_SCALE_MAX,
    "What the outlier entries of x are multiplied by.",
    log=True,
    group="data",
)
NVFP4_HADAMARD = Bounds(
    "NVFP4 Hadamard transform",
    0,
    0,
    "nvfp4 only. on: the weight-gradient matmul's two inputs are rotated by a random 16 x 16 "
    "Hadamard transform before they are quantized, spreading an outlier over its 16 rows (as "
    "TransformerEngine's NVFP4 recipe does); off: quantized as they are.",
    choices=HADAMARD_CHOICES,
    group="float8",
)
