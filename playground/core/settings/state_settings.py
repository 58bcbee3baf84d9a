"""The optimizer state's and the accumulator's settings: ranges and help lines, appended to the
settings table.

Rule: ``moments_dtype`` is the dtype the optimizer's state is stored in between steps
(``core.model.optimizers``); ``accumulation`` and ``promotion_interval`` say how every matmul
accumulates its products (``core.formats.accumulation``). Their defaults (float32, float32, 0)
keep every number as it was. Choices and limits come from those modules.
"""

from __future__ import annotations

from playground.core.bounds import Bounds
from playground.core.formats.accumulation import (
    ACCUMULATOR_BITS,
    CHUNK,
    PROMOTION_MAX,
)
from playground.core.model.optimizers import MOMENTS_DTYPES

MOMENTS_DTYPE = Bounds(
    "optimizer state dtype",
    0,
    0,
    "The dtype the optimizer's state (momentum's trace, Adam's two moments) is stored in "
    "between steps, as DeepSeek-V3 keeps AdamW's moments in bfloat16. One step from a fresh "
    "state reads nothing stored, so it changes a training run's later steps, never plain SGD.",
    choices=MOMENTS_DTYPES,
    group="model",
)
ACCUMULATION = Bounds(
    "matmul accumulation",
    0,
    0,
    "How every matmul of the step (forward and backward) accumulates its products, emulated: "
    "float32 (XLA's own); "
    + "; ".join(
        f"{name}: a running sum of {bits} significant bits"
        for name, bits in ACCUMULATOR_BITS.items()
        if name != "float32"
    )
    + f", each chunk of {CHUNK} products summed in float32 first (14 bits: what DeepSeek-V3 "
    "measured for FP8 GEMMs on H800).",
    choices=tuple(ACCUMULATOR_BITS),
)
PROMOTION_INTERVAL = Bounds(
    "promotion interval",
    0,
    PROMOTION_MAX,
    f"0: never; K (a multiple of {CHUNK}): every K products the low-precision running sum is "
    "added to a float32 accumulator and restarted, as DeepSeek-V3 does every 128. No effect "
    "under float32 accumulation.",
    integer=True,
)


def check_promotion_interval(value: int) -> str | None:
    """The refusal of a promotion interval in range but not a multiple of CHUNK, or None."""
    if value % CHUNK:
        return (
            f"promotion_interval ({PROMOTION_INTERVAL.label}) must be 0 or a multiple of {CHUNK} "
            f"in [0, {PROMOTION_MAX}]; got {value}"
        )
    return None
