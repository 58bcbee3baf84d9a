"""Scenarios that several test modules run: each one a config with the fact it is built for."""

from __future__ import annotations

from playground import StepConfig

# float16 data near 2^-12: a scale of 2^10 recovers its gradients, too large a scale overflows.
TINY_FLOAT16 = StepConfig(
    n=32,
    d_in=8,
    d_out=4,
    compute_dtype="float16",
    input_scale=2.0**-12,
    target_scale=2.0**-12,
    loss_scale=2.0**10,
)

# Float8 with delayed scaling over one step of history: the gradient arriving at the last matmul
# is S x dloss/dprediction, so at each doubling of S (dynamic scaling, every 5 steps) its amax
# jumps about 2x past the one step of history the delayed scale was taken from, and that step's
# gradient cast saturates.
FLOAT8_SPIKES = StepConfig(
    n=32,
    d_in=8,
    d_out=4,
    compute_dtype="float8",
    fp8_scaling="delayed",
    amax_history=1,
    mode="dynamic",
    period=5,
)
