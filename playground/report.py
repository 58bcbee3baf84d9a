"""The step report: the mixed step, its float32 twin and their comparison, in one compiled call.

Rule::

    x, y      = make_batch(config)
    mixed     = step_trace(key(model_seed), x, y, lr, S, compute_dtype)
    baseline  = step_trace(key(model_seed), x, y, lr, 1, float32)
    per parameter p in (kernel, bias): statistics of mixed.grads[p] against baseline.grads[p]

The two steps run in ``_analyse``, jitted with the seed, lr and S traced and the dtype static:
JAX compiles it once per (shapes, compute dtype), and every later call with other seeds, rates
or scales reuses the executable. Its outputs are moved to numpy in one transfer; the statistics
are then computed in numpy and everything is frozen into a StepReport, so no JAX state leaks
into the views.
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
        inf when only the baseline is 0; inf or NaN when a gradient entry is not finite).
      median_rel_error, max_rel_error: over the entries where rel_error is defined (NaN if none).
      underflow_count: entries that are 0 in mixed_grads but not in float32_grads.
      nonfinite_scaled_count, nonfinite_count: inf or NaN entries in scaled_grads, mixed_grads.
      lost_update_count: entries with lr * mixed_grads != 0 whose value did not change, because
        the update was at most half the float32 spacing at that parameter.
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


# The order of the per-parameter arrays in _analyse's packed output.
TRACE_FIELDS = (
    "before",
    "mixed_after",
    "float32_after",
    "scaled_grads",
    "mixed_grads",
    "float32_grads",
)
LOSS_FIELDS = (
    "mixed_initial_loss",
    "mixed_new_loss",
    "float32_initial_loss",
    "float32_new_loss",
)


# XLA's backend optimization level 1 compiles this program about 20% faster than the default
# level on CPU at the same run time (measured on a 2-vCPU machine: 526 -> 430 ms to compile at
# 48x8x4, 182 -> 184 ms to run at 4096x1024x1024); first calls at a new shape matter here.
@functools.partial(
    jax.jit,
    static_argnames=("compute_dtype",),
    compiler_options={"xla_backend_optimization_level": 1},
)
def _analyse(model_seed, x, y, lr, loss_scale, *, compute_dtype: str):
    """Both steps, packed into two outputs (each output is one transfer).

    Returns the four losses (LOSS_FIELDS order) and a (6, D_in * D_out + D_out) float32 array:
    one row per TRACE_FIELDS entry, each row the flattened kernel followed by the bias.
    """
    key = jax.random.key(model_seed)
    mixed = step_trace(key, x, y, lr, loss_scale, jnp.dtype(compute_dtype))
    baseline = step_trace(key, x, y, lr, 1.0, jnp.float32)
    losses = jnp.concatenate(
        [mixed.initial_loss, mixed.new_loss, baseline.initial_loss, baseline.new_loss]
    )
    rows = (
        mixed.params_before,
        mixed.params_after,
        baseline.params_after,
        mixed.scaled_grads,
        mixed.grads,
        baseline.grads,
    )
    flat = jnp.stack([jnp.concatenate([row[n].ravel() for n in PARAM_NAMES]) for row in rows])
    return losses, flat


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def _param_reports(flat: np.ndarray, lr: float, d_in: int, d_out: int) -> dict[str, ParamReport]:
    """The ParamReports of kernel and bias from _analyse's flat rows; statistics as documented.

    The statistics run in numpy on the host, for both parameters at once (one numpy call per
    statistic, split by ``reduceat`` at the kernel/bias boundary): they are O(D_in * D_out)
    reductions that cost the same here as in XLA, while computing them in the jitted program
    added about 200 ms to its compilation at every new shape (4096 x 1024 x 1024, 2 vCPUs).
    Overflowed gradients make inf and NaN on purpose, so floating-point warnings are silenced.
    """
    shapes = {"kernel": (d_in, d_out), "bias": (d_out,)}
    starts = np.array([0, d_in * d_out])
    before, mixed_after, _, scaled, mixed, base = _readonly(flat)
    with np.errstate(all="ignore"):
        step = np.float32(lr) * mixed
        difference = mixed - base
        rel_error = np.abs(difference) / np.abs(base)
        rel_error[base == 0] = np.nan
        update_ratio = np.abs(step) / np.abs(before)
        update_ratio[before == 0] = np.nan
        squares = np.stack([base, difference]).astype(np.float64) ** 2
        base_norm, difference_norm = np.sqrt(np.add.reduceat(squares, starts, axis=1))
        norm_rel_error = np.where(
            base_norm > 0,
            difference_norm / base_norm,
            np.where(difference_norm == 0, 0.0, np.inf),
        )
        # fmax ignores NaN (undefined entries) and gives NaN only when every entry is NaN.
        max_rel_error = np.fmax.reduceat(rel_error, starts)
    masks = np.stack(
        [
            (mixed == 0) & (base != 0),
            ~np.isfinite(scaled),
            ~np.isfinite(mixed),
            (step != 0) & (mixed_after == before),
        ]
    )
    counts = np.add.reduceat(masks, starts, axis=1, dtype=np.int64)
    derived = {"rel_error": _readonly(rel_error), "update_ratio": _readonly(update_ratio)}
    reports = {}
    for index, (name, shape) in enumerate(shapes.items()):
        part = slice(starts[index], starts[index] + math.prod(shape))
        # Views into the transferred rows and the two derived arrays: nothing is copied.
        arrays = {
            field: row[part].reshape(shape) for field, row in zip(TRACE_FIELDS, flat, strict=True)
        }
        arrays |= {field: row[part].reshape(shape) for field, row in derived.items()}
        reports[name] = ParamReport(
            name=name,
            **arrays,
            norm_rel_error=float(norm_rel_error[index]),
            max_rel_error=float(max_rel_error[index]),
            underflow_count=int(counts[0, index]),
            nonfinite_scaled_count=int(counts[1, index]),
            nonfinite_count=int(counts[2, index]),
            lost_update_count=int(counts[3, index]),
        )
    return reports


def run_report(config: StepConfig) -> StepReport:
    """Run the mixed step and its float32 twin for ``config`` and compare them.

    Args:
      config: a validated StepConfig.

    Returns:
      A StepReport of numpy arrays and Python numbers. Overflow and underflow are results, not
      errors: they show up as counts and non-finite values.
    """
    x, y = make_batch(config)
    losses, flat = _analyse(
        np.uint32(config.model_seed),
        x,
        y,
        np.float32(config.lr),
        np.float32(config.loss_scale),
        compute_dtype=config.compute_dtype,
    )
    return StepReport(
        config=config,
        **{field: float(v) for field, v in zip(LOSS_FIELDS, np.asarray(losses), strict=True)},
        params=_param_reports(np.asarray(flat), config.lr, config.d_in, config.d_out),
    )
