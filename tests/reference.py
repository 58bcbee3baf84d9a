"""An independent float64 model of the step, written with numpy and ml_dtypes only.

It rounds to the compute dtype where the exercise casts (inputs, parameters, forward result)
and does the rest in float64. The library's accumulators may round more often, so tests compare
with tolerances of a few low-precision ulps, never bit for bit.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from flax import nnx

DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}


def initial_params(seed: int, d_in: int, d_out: int) -> tuple[np.ndarray, np.ndarray]:
    """Flax's own default initialization (not the code under test)."""
    layer = nnx.Linear(d_in, d_out, rngs=nnx.Rngs(int(seed)))
    return np.asarray(layer.kernel[...]), np.asarray(layer.bias[...])


def rounded(values, dtype: str) -> np.ndarray:
    """Round to ``dtype`` and return float64."""
    return np.asarray(values, np.float64).astype(DTYPES[dtype]).astype(np.float64)


def loss(kernel, bias, x, y, dtype: str) -> float:
    """MSE with rounded inputs, rounded prediction and a rounded result."""
    prediction = rounded(rounded(x, dtype) @ rounded(kernel, dtype) + rounded(bias, dtype), dtype)
    return float(rounded(np.mean((prediction - rounded(y, dtype)) ** 2), dtype))


def grads(kernel, bias, x, y, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Exact float64 gradients of the MSE at the rounded forward values."""
    xr = rounded(x, dtype)
    prediction = rounded(xr @ rounded(kernel, dtype) + rounded(bias, dtype), dtype)
    d_prediction = 2.0 * (prediction - rounded(y, dtype)) / prediction.size
    return xr.T @ d_prediction, d_prediction.sum(axis=0)


def step(seed, x, y, lr, dtype="bfloat16"):
    """(initial loss, new loss, kernel grad, bias grad) of one SGD step."""
    kernel, bias = initial_params(seed, x.shape[1], y.shape[1])
    kernel_grad, bias_grad = grads(kernel, bias, x, y, dtype)
    new_kernel = kernel - lr * kernel_grad
    new_bias = bias - lr * bias_grad
    return (
        loss(kernel, bias, x, y, dtype),
        loss(new_kernel, new_bias, x, y, dtype),
        kernel_grad,
        bias_grad,
    )


def band_labels(dtype: str) -> list[str]:
    """The labels drawn for ``dtype``: its subnormal band says so where this CPU flushes them.

    Measured here with plain jax: the smallest subnormal times a runtime one.
    """
    tiny = jnp.asarray(jnp.finfo(jnp.dtype(dtype)).smallest_subnormal, jnp.dtype(dtype))
    flushed = float(jax.jit(lambda a, b: a * b)(tiny, jnp.ones((), tiny.dtype))) == 0.0
    subnormal = "subnormal, flushed here" if flushed else "subnormal"
    return ["flushed to 0", subnormal, "normal", "overflow"]
