"""Loss-scale sweep: the mixed step at every S = 2^0, 2^1, ..., 2^K in one compiled call.

Rule, for a config and its compute dtype::

    K        = min(floor(log2(max of the recipe's gradient format)) + 1,
                   log2(the loss_scale setting's maximum))
               # just past the largest gradient it holds (S scales the gradients: float8's
               # E5M2, max 57344), and never past a legal loss scale
    baseline = the float32 twin (S = 1)
    for each S (jax.lax.map, one compiled program, at most 8 scales per batch to bound
               memory, the batches of equal size: see ``scale_batches``):
        mixed        = the step at S in the dtype
        rel_error(S) = max over parameters p of metrics.norm_rel_error(mixed.grads[p], baseline[p])
        underflow(S) = share of entries 0 in mixed.grads but not in baseline.grads
        nonfinite(S) = share of non-finite entries in mixed.scaled_grads
        new_loss(S)  = mixed.new_loss
    safe(S) = nonfinite(S) == 0 and rel_error(S) <= 2 * min over the sweep of rel_error

The safe window is "as close to float32 as this dtype gets": the error of a low-precision step
never reaches zero, so the yardstick is the best scale in the sweep.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from playground.core.data.user_data import UserData, fitted
from playground.core.formats import metrics
from playground.core.formats.dtypes import dtype_facts
from playground.core.frozen import freeze
from playground.core.model.models import ModelChoice, build_model
from playground.core.model.optimizers import build_optimizer
from playground.core.recipes.registry import recipe
from playground.core.settings.cost import check_sweep
from playground.core.settings.settings import StepConfig, settings
from playground.core.step.compiled import program, run_compiled
from playground.core.step.loss_scale import NoOpLossScale, StaticLossScale
from playground.core.step.policy import Policy, policy_for
from playground.core.step.step import float32_twin, step_trace

SAFE_FACTOR = 2.0
# The most scales one step of the sweep's loop computes side by side (vmapped): its memory.
MOST_SCALES_PER_BATCH = 8


def scale_batches(count: int) -> tuple[int, int]:
    """(batches, scales per batch) for ``count`` scales: the fewest batches of at most
    MOST_SCALES_PER_BATCH, all of one size, so that ``jax.lax.map`` compiles the vmapped step
    once (batches of 8 and a remainder would compile a second copy for the remainder). The
    scales are padded to batches x size with the last one, whose repeats are dropped.

    >>> scale_batches(10)  # 2 x 5, not 8 + 2
    (2, 5)
    >>> scale_batches(127)  # bfloat16's sweep: 16 x 8, the last scale repeated once
    (16, 8)
    """
    batches = -(-count // MOST_SCALES_PER_BATCH)
    return batches, -(-count // batches)


def _log2_max(dtype: str) -> int:
    return math.floor(math.log2(dtype_facts(recipe(dtype).gradient_format).max))


def sweep_exponents(dtype: str) -> np.ndarray:
    """0, 1, ..., K: the last scale exceeds the largest finite value of the compute dtype's
    gradient format (see the rule)."""
    legal = math.floor(math.log2(settings()["loss_scale"].high))
    return np.arange(0, min(_log2_max(dtype) + 1, legal) + 1)


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


def _flat(params: dict[str, jax.Array]) -> jax.Array:
    return jnp.concatenate([leaf.ravel() for leaf in params.values()])


@program(static_argnames=("precision", "model", "optimizer"))
def _curves_over_scales(
    model_seed,
    x,
    y,
    lr,
    loss_scale,
    scales,
    *,
    precision: Policy,
    model: ModelChoice,
    optimizer: str,
):
    """(float32 new loss, per-scale curves); ``loss_scale`` is unused (the scales are swept)."""
    del loss_scale
    key = jax.random.key(model_seed)
    d_in, d_out = x.shape[-1], y.shape[-1]

    def trace(scaling, policy):
        network = build_model(model, d_in, d_out, nnx.Rngs(key))
        return step_trace(network, build_optimizer(optimizer, lr), x, y, scaling, policy)

    # The twin computes the same task's loss, every operation in float32.
    baseline = trace(NoOpLossScale(), float32_twin(precision))
    baseline_grads = _flat(baseline.grads)

    def at_scale(scale):
        mixed = trace(StaticLossScale(scale), precision)
        # Per parameter, then the worst: the kernel's and the bias's gradients can differ by
        # orders of magnitude, and a joint norm would hide the smaller one's error.
        rel_error = jnp.max(
            jnp.stack(
                [
                    metrics.norm_rel_error(mixed.grads[name], baseline.grads[name], xp=jnp)
                    for name in baseline.grads
                ]
            )
        )
        return (
            rel_error,
            jnp.mean(metrics.underflow_mask(_flat(mixed.grads), baseline_grads)),
            jnp.mean(metrics.nonfinite_mask(_flat(mixed.scaled_grads), xp=jnp)),
            mixed.new_loss[0],
        )

    # lax.map in batches: one compiled loop whose memory does not grow with the number of scales
    # (``scales`` comes padded to a whole number of batches: no remainder compiled apart).
    _, size = scale_batches(scales.shape[0])
    return baseline.new_loss[0], jax.lax.map(at_scale, scales, batch_size=size)


def check_sweep_work(config: StepConfig, scales: int) -> None:
    """ConfigError when the sweep is over the cost model's work or memory cap
    (``core.settings.cost.check_sweep``): the message names the field, the cap and what fits."""
    check_sweep(config, scales)


def run_sweep(config: StepConfig, data: UserData | None = None) -> SweepReport:
    """Sweep the loss scale for ``config`` (its own loss_scale is ignored; see the module rule).

    Args:
      config: a validated StepConfig.
      data: a user's own batch (an uploaded CSV), used instead of the synthetic one (N and D_in
        follow it).

    Returns:
      A SweepReport; compiled once per (shapes, precision policy).

    Raises:
      ConfigError: naming ``n`` past the sweep's work cap (``check_sweep_work``).
    """
    config, batch = fitted(config, data)
    exponents = sweep_exponents(config.compute_dtype)
    check_sweep_work(config, exponents.size)
    scales = np.exp2(exponents).astype(np.float32)
    batches, size = scale_batches(scales.size)
    padded = np.concatenate([scales, np.repeat(scales[-1:], batches * size - scales.size)])
    float32_loss, curves = run_compiled(
        _curves_over_scales,
        config,
        padded,
        batch=batch,
        precision=policy_for(config),
        model=config.model_choice,
        optimizer=config.optimizer,
    )
    rel_error, underflow, nonfinite, new_loss = (curve[: scales.size] for curve in curves)
    finite_error = np.where(np.isfinite(rel_error), rel_error, np.inf)
    safe = (nonfinite == 0) & (finite_error <= SAFE_FACTOR * finite_error.min())
    return SweepReport(
        config=config,
        exponents=freeze(exponents),
        rel_error=rel_error,
        underflow_share=underflow,
        nonfinite_share=nonfinite,
        new_loss=new_loss,
        float32_new_loss=float(float32_loss),
        safe=freeze(safe),
    )
