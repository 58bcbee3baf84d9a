"""Loss-scale sweep: the mixed step at every S = 2^0, 2^1, ..., 2^K in one compiled call.

Rule, for a config and its compute dtype::

    K        = min(floor(log2(finfo(dtype).max)) + 1, 127)   # past the dtype's largest value;
                                                              # 2^128 is not a float32
    baseline = step_trace(seed, x, y, lr, 1, float32)
    for each S (jax.lax.map, one compiled program, 8 scales per batch to bound memory):
        mixed        = step_trace(seed, x, y, lr, S, dtype)
        rel_error(S) = max over p in (kernel, bias) of norm_rel_error(mixed.grads[p], baseline[p])
        underflow(S) = share of entries 0 in mixed.grads but not in baseline.grads
        nonfinite(S) = share of non-finite entries in mixed.scaled_grads
        new_loss(S)  = mixed.new_loss
    safe(S) = nonfinite(S) == 0 and rel_error(S) <= 2 * min over the sweep of rel_error

The safe window is "as close to float32 as this dtype gets": the error of a low-precision step
never reaches zero, so the yardstick is the best scale in the sweep.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from playground.config import StepConfig
from playground.data import make_batch
from playground.precision import dtype_facts
from playground.step import PARAM_NAMES, step_trace

SAFE_FACTOR = 2.0
MAX_EXPONENT = 127  # 2^127 is the largest power of two a float32 loss scale can hold


def sweep_exponents(dtype: str) -> np.ndarray:
    """0, 1, ..., K: the last scale exceeds the dtype's largest finite value."""
    last = min(math.floor(math.log2(dtype_facts(dtype).max)) + 1, MAX_EXPONENT)
    return np.arange(0, last + 1)


@dataclass(frozen=True)
class SweepReport:
    """The sweep's curves, one entry per exponent (read-only numpy arrays), see the module rule."""

    config: StepConfig
    exponents: np.ndarray
    rel_error: np.ndarray
    underflow_share: np.ndarray
    nonfinite_share: np.ndarray
    new_loss: np.ndarray
    float32_new_loss: float
    safe: np.ndarray

    @property
    def safe_exponents(self) -> np.ndarray:
        return self.exponents[self.safe]


def _norm_rel_error(values: jax.Array, reference: jax.Array) -> jax.Array:
    """ParamReport.norm_rel_error's definition inside the program (float32 norms, per scale)."""
    reference_norm = jnp.linalg.norm(reference)
    difference_norm = jnp.linalg.norm(values - reference)
    return jnp.where(
        reference_norm > 0,
        difference_norm / reference_norm,
        jnp.where(difference_norm == 0, 0.0, jnp.inf),
    )


def _flat(params: dict[str, jax.Array]) -> jax.Array:
    return jnp.concatenate([params[name].ravel() for name in PARAM_NAMES])


@functools.partial(jax.jit, static_argnames=("compute_dtype",))
def _sweep(model_seed, x, y, lr, scales, *, compute_dtype: str):
    key = jax.random.key(model_seed)
    baseline = step_trace(key, x, y, lr, 1.0, jnp.float32)
    baseline_grads = _flat(baseline.grads)

    def at_scale(scale):
        mixed = step_trace(key, x, y, lr, scale, jnp.dtype(compute_dtype))
        grads = _flat(mixed.grads)
        # Per parameter, then the worst: the kernel's and the bias's gradients can differ by
        # orders of magnitude, and a joint norm would hide the smaller one's error.
        rel_error = jnp.max(
            jnp.stack([_norm_rel_error(mixed.grads[n], baseline.grads[n]) for n in PARAM_NAMES])
        )
        return (
            rel_error,
            jnp.mean((grads == 0) & (baseline_grads != 0)),
            jnp.mean(~jnp.isfinite(_flat(mixed.scaled_grads))),
            mixed.new_loss[0],
        )

    # lax.map in batches: one compiled loop whose memory does not grow with the number of scales.
    return baseline.new_loss[0], jax.lax.map(at_scale, scales, batch_size=8)


def run_sweep(config: StepConfig) -> SweepReport:
    """Sweep the loss scale for ``config`` (its own loss_scale is ignored; see the module rule).

    Returns:
      A SweepReport; compiled once per (shapes, compute dtype).
    """
    exponents = sweep_exponents(config.compute_dtype)
    x, y = make_batch(config)
    float32_loss, curves = jax.device_get(
        _sweep(
            np.uint32(config.model_seed),
            x,
            y,
            np.float32(config.lr),
            np.exp2(exponents).astype(np.float32),
            compute_dtype=config.compute_dtype,
        )
    )
    rel_error, underflow, nonfinite, new_loss = (np.asarray(curve) for curve in curves)
    finite_error = np.where(np.isfinite(rel_error), rel_error, np.inf)
    safe = (nonfinite == 0) & (finite_error <= SAFE_FACTOR * finite_error.min())
    arrays = (exponents, rel_error, underflow, nonfinite, new_loss, safe)
    for array in arrays:
        array.flags.writeable = False
    return SweepReport(
        config=config,
        exponents=exponents,
        rel_error=rel_error,
        underflow_share=underflow,
        nonfinite_share=nonfinite,
        new_loss=new_loss,
        float32_new_loss=float(float32_loss),
        safe=safe,
    )
