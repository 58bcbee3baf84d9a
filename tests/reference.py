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


def squared_residuals(kernel, bias, x, y, dtype: str) -> np.ndarray:
    """The MSE's terms in float64: (rounded prediction - rounded target) squared, unrounded."""
    prediction = rounded(rounded(x, dtype) @ rounded(kernel, dtype) + rounded(bias, dtype), dtype)
    return (prediction - rounded(y, dtype)) ** 2


def loss(kernel, bias, x, y, dtype: str) -> float:
    """MSE with rounded inputs, rounded prediction and a rounded result."""
    return float(rounded(np.mean(squared_residuals(kernel, bias, x, y, dtype)), dtype))


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


# (exponent bits, stored mantissa bits) of each format, from its specification (IEEE 754
# binary32 and binary16, Google's bfloat16, the OCP FP8 formats E4M3 and E5M2).
WIDTHS = {
    "float32": (8, 23),
    "bfloat16": (8, 7),
    "float16": (5, 10),
    "float8_e4m3fn": (4, 3),
    "float8_e5m2": (5, 2),
}
# Formats without an infinity ("fn": finite, NaN only at all-ones): the all-ones exponent holds
# numbers too, except the all-ones mantissa there, which is NaN.
FINITE_ONLY = {"float8_e4m3fn"}

# The float8 recipe's formats, from ml_dtypes (not from the code under test).
FLOAT8 = {"float8_e4m3fn": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}


def float8_quantized(values, fmt: str, scaling: str) -> tuple[np.ndarray, np.float32]:
    """(dequantized float64 values, scale): the tensor made float32, multiplied in float32 by
    its scale (1, or for 'current' the format's largest value over the tensor's amax), clipped
    to +-largest (saturation), cast with ml_dtypes, then divided by the scale in float64."""
    values = np.asarray(values, np.float32)
    largest = np.float32(ml_dtypes.finfo(FLOAT8[fmt]).max)
    amax = np.max(np.abs(values))
    scale = largest / amax if scaling == "current" and amax > 0 else np.float32(1)
    stored = np.clip(values * scale, -largest, largest).astype(FLOAT8[fmt])
    return stored.astype(np.float64) / np.float64(scale), scale


def float8_model(params, x, y, activation, scaling: str, loss_scale: float = 1.0):
    """(loss, {name: gradient}) of the float8 recipe on a stack of linear layers, float64.

    Forward: each layer's input and kernel quantized to E4M3, a float64 matmul of the
    dequantized values, the float64 bias; ``activation`` = (f, f') between layers (None for one
    layer). Backward: the scaled gradient arriving at each matmul's output quantized to E5M2;
    kernel gradient = quantized input^T @ it, bias gradient = the unquantized gradient summed,
    the gradient passed down = it @ quantized kernel^T. Gradients are divided by the loss scale.
    A fresh 'delayed' history scales by 1, like 'none'.
    """
    scaling = "none" if scaling == "delayed" else scaling
    layers = [name[: -len("kernel")] for name in params if name.endswith("kernel")]
    inputs, kernels, pre = [], [], []
    h = np.asarray(x, np.float64)
    for index, layer in enumerate(layers):
        a, _ = float8_quantized(h, "float8_e4m3fn", scaling)
        b, _ = float8_quantized(params[layer + "kernel"], "float8_e4m3fn", scaling)
        z = a @ b + np.asarray(params[layer + "bias"], np.float64)
        inputs.append(a)
        kernels.append(b)
        pre.append(z)
        h = activation[0](z) if index < len(layers) - 1 else z
    residual = h - np.asarray(y, np.float64)
    delta = loss_scale * 2 * residual / residual.size
    grads = {}
    for index in reversed(range(len(layers))):
        if index < len(layers) - 1:
            delta = delta * activation[1](pre[index])
        g, _ = float8_quantized(delta, "float8_e5m2", scaling)
        grads[layers[index] + "kernel"] = inputs[index].T @ g / loss_scale
        grads[layers[index] + "bias"] = delta.sum(axis=0) / loss_scale
        delta = g @ kernels[index].T
    return float(np.mean(residual**2)), grads
