"""The step report: the mixed step, its float32 twin and their comparison, in one compiled call.

Rule::

    x, y      = make_batch(config)
    mixed     = step_trace(key(model_seed), x, y, lr, S, compute_dtype)
    baseline  = step_trace(key(model_seed), x, y, lr, 1, float32)
    per parameter p in (kernel, bias): statistics of mixed.grads[p] against baseline.grads[p]

``_analyse`` is jitted with the seed, lr and S traced and the dtype static, so JAX compiles it
once per (shapes, compute dtype) and every later call with other seeds, rates or scales reuses
the executable. Its outputs are moved to numpy in one transfer and frozen into a StepReport, so
no JAX state leaks into the views.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from playground.config import StepConfig
from playground.data import make_batch
from playground.step import PARAM_NAMES, step_trace


@dataclass(frozen=True)
class ParamReport:
    """One parameter (kernel or bias) of both paths, as read-only numpy float32 arrays.

    Arrays (shape of the parameter):
      before: the float32 master values before the step (both paths start here).
      mixed_after, float32_after: the values after the mixed step and after the float32 twin.
      scaled_grads: gradients of S * loss from the low-precision backward pass (each value is
        exactly representable in the compute dtype; inf where it overflowed).
      mixed_grads: scaled_grads / S in float32, the update's input.
      float32_grads: the float32 twin's gradients.
      rel_error: |mixed_grads - float32_grads| / |float32_grads|; NaN where float32_grads == 0.
      update_ratio: |lr * mixed_grads| / |before|, the step's relative size; NaN where before == 0.

    Statistics:
      norm_rel_error: ||mixed_grads - float32_grads||_2 / ||float32_grads||_2 (0 when both are 0,
        inf when only the baseline is 0, NaN when a gradient is not finite).
      median_rel_error, max_rel_error: over the entries where rel_error is defined (NaN if none).
      underflow_count: entries that are 0 in mixed_grads but not in float32_grads.
      nonfinite_scaled_count, nonfinite_count: inf or NaN entries in scaled_grads, mixed_grads.
      lost_update_count: entries with lr * mixed_grads != 0 whose value did not change, because
        the update was smaller than half the float32 spacing at that parameter.
      median_update_ratio: median of update_ratio over its defined entries.
    """

    name: str
    before: np.ndarray
    mixed_after: np.ndarray
    float32_after: np.ndarray
    scaled_grads: np.ndarray
    mixed_grads: np.ndarray
    float32_grads: np.ndarray
    rel_error: np.ndarray
    update_ratio: np.ndarray
    norm_rel_error: float
    max_rel_error: float
    underflow_count: int
    nonfinite_scaled_count: int
    nonfinite_count: int
    lost_update_count: int

    @property
    def size(self) -> int:
        """Number of entries."""
        return int(self.before.size)

    # Medians are computed on first use with numpy's O(n) selection: XLA's CPU sort made them
    # the most expensive part of the compiled report.
    @functools.cached_property
    def median_rel_error(self) -> float:
        return _nanmedian(self.rel_error)

    @functools.cached_property
    def median_update_ratio(self) -> float:
        return _nanmedian(self.update_ratio)


def _nanmedian(values: np.ndarray) -> float:
    """Median of the non-NaN entries; NaN when there are none."""
    defined = values[~np.isnan(values)]
    return float(np.median(defined)) if defined.size else float("nan")


@dataclass(frozen=True)
class StepReport:
    """One run: the config, the four losses and a ParamReport per parameter.

    Losses are Python floats: ``mixed_new_loss`` is exactly what ``mixed_precision_step``
    returns for this data (bfloat16 compute), ``*_initial_loss`` are the unscaled losses
    before the step, ``float32_*`` those of the float32 twin.
    """

    config: StepConfig
    mixed_initial_loss: float
    mixed_new_loss: float
    float32_initial_loss: float
    float32_new_loss: float
    params: dict[str, ParamReport]

    @property
    def kernel(self) -> ParamReport:
        return self.params["kernel"]

    @property
    def bias(self) -> ParamReport:
        return self.params["bias"]


# The order of the per-parameter arrays and statistics in _analyse's packed outputs.
ARRAY_FIELDS = (
    "before",
    "mixed_after",
    "float32_after",
    "scaled_grads",
    "mixed_grads",
    "float32_grads",
    "rel_error",
    "update_ratio",
)
STAT_FIELDS = (
    "norm_rel_error",
    "max_rel_error",
    "underflow_count",
    "nonfinite_scaled_count",
    "nonfinite_count",
    "lost_update_count",
)
LOSS_FIELDS = (
    "mixed_initial_loss",
    "mixed_new_loss",
    "float32_initial_loss",
    "float32_new_loss",
)


def _nan_where(mask: jax.Array, values: jax.Array) -> jax.Array:
    return jnp.where(mask, values, jnp.nan)


def norm_rel_error(values: jax.Array, reference: jax.Array) -> jax.Array:
    """||values - reference|| / ||reference||: 0 when both are 0, inf when only reference is."""
    reference_norm = jnp.linalg.norm(reference)
    difference_norm = jnp.linalg.norm(values - reference)
    return jnp.where(
        reference_norm > 0,
        difference_norm / reference_norm,
        jnp.where(difference_norm == 0, 0.0, jnp.inf),
    )


def _compare(mixed, baseline, name: str, lr: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One parameter's arrays (stacked in ARRAY_FIELDS order) and statistics (STAT_FIELDS order).

    Definitions are in ParamReport's docstring. Counts are exact in float32 up to 2**24 entries.
    """
    mixed_grads, float32_grads = mixed.grads[name], baseline.grads[name]
    before, mixed_after = mixed.params_before[name], mixed.params_after[name]
    difference = mixed_grads - float32_grads
    rel_error = _nan_where(float32_grads != 0, jnp.abs(difference) / jnp.abs(float32_grads))
    step = lr * mixed_grads
    arrays = (
        before,
        mixed_after,
        baseline.params_after[name],
        mixed.scaled_grads[name],
        mixed_grads,
        float32_grads,
        rel_error,
        _nan_where(before != 0, jnp.abs(step) / jnp.abs(before)),
    )
    stats = (
        norm_rel_error(mixed_grads, float32_grads),
        jnp.nanmax(rel_error),
        jnp.sum((mixed_grads == 0) & (float32_grads != 0)),
        jnp.sum(~jnp.isfinite(mixed.scaled_grads[name])),
        jnp.sum(~jnp.isfinite(mixed_grads)),
        jnp.sum((step != 0) & (mixed_after == before)),
    )
    return jnp.stack(arrays), jnp.stack([jnp.asarray(v, jnp.float32) for v in stats])


# XLA's backend optimization level 1 compiles this program about 20% faster than the default
# level on CPU at the same run time (measured on a 2-vCPU machine: 526 -> 430 ms to compile at
# 48x8x4, 182 -> 184 ms to run at 4096x1024x1024); first calls at a new shape matter here.
@functools.partial(
    jax.jit,
    static_argnames=("compute_dtype",),
    compiler_options={"xla_backend_optimization_level": 1},
)
def _analyse(model_seed, x, y, lr, loss_scale, *, compute_dtype: str):
    """Both steps and their comparison, packed into few outputs: each output is one transfer."""
    key = jax.random.key(model_seed)
    mixed = step_trace(key, x, y, lr, loss_scale, jnp.dtype(compute_dtype))
    baseline = step_trace(key, x, y, lr, 1.0, jnp.float32)
    losses = jnp.concatenate(
        [mixed.initial_loss, mixed.new_loss, baseline.initial_loss, baseline.new_loss]
    )
    return losses, {name: _compare(mixed, baseline, name, lr) for name in PARAM_NAMES}


def _param_report(name: str, arrays: np.ndarray, stats: np.ndarray) -> ParamReport:
    arrays.flags.writeable = False  # the per-field views below inherit read-only
    return ParamReport(
        name=name,
        **dict(zip(ARRAY_FIELDS, arrays, strict=True)),
        **{
            field: int(value) if field.endswith("_count") else float(value)
            for field, value in zip(STAT_FIELDS, stats, strict=True)
        },
    )


def run_report(config: StepConfig) -> StepReport:
    """Run the mixed step and its float32 twin for ``config`` and compare them.

    Args:
      config: a validated StepConfig.

    Returns:
      A StepReport of numpy arrays and Python numbers. Overflow and underflow are results, not
      errors: they show up as counts and non-finite values.
    """
    x, y = make_batch(config)
    losses, params = jax.device_get(
        _analyse(
            np.uint32(config.model_seed),
            x,
            y,
            np.float32(config.lr),
            np.float32(config.loss_scale),
            compute_dtype=config.compute_dtype,
        )
    )
    return StepReport(
        config=config,
        **{field: float(value) for field, value in zip(LOSS_FIELDS, losses, strict=True)},
        params={name: _param_report(name, *params[name]) for name in PARAM_NAMES},
    )
