"""One step of a training run (float32 masters or parameters stored in low precision).

Rule: a step differentiates the scaled low-precision loss at the stored parameters (widened to
float32 when they are float8, whose arrays take no implicit promotion), unscales in float32,
holds the gradient in the parameters' dtype, lets the optimizer make the update, and stores
p + update with the run's rounding (nearest, or a rule of ``playground.core.formats.rounding``). It
reports the share of entries whose nonzero update left no trace in what the run stores, and
the share whose update was zero because the gradient underflowed (float32's gradient at the
same parameters is not zero there).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import optax
from flax import nnx

from playground.core.formats import metrics, rounding
from playground.core.recipes.float8 import STATS
from playground.core.step.loss_scale import all_finite
from playground.core.step.policy import FLOAT32_TWIN, Policy
from playground.core.step.step import low_precision_loss


def float32_mse(graphdef, params, x, y, task: str = FLOAT32_TWIN.task):
    """The float32 twin's loss of ``params`` for ``task`` (the MSE by default; the softmax
    cross-entropy for classification), every operation in float32."""
    twin = dataclasses.replace(FLOAT32_TWIN, task=task)
    return low_precision_loss(nnx.merge(graphdef, params), x, y, twin)


def _lost_share(before, after, updates, kept=None) -> jax.Array:
    """Share of all parameter entries whose nonzero update left the stored value unchanged
    (and, where ``kept`` masks are given, the rounding's state as well)."""
    lost = jax.tree.map(metrics.lost_update_mask, before, after, updates)
    if kept is not None:
        lost = jax.tree.map(jnp.logical_and, lost, kept)
    return _share(lost)


def _share(masks) -> jax.Array:
    """Share of all entries of the tree ``masks`` that are True."""
    size = sum(leaf.size for leaf in jax.tree.leaves(masks))
    return sum(jax.tree.leaves(jax.tree.map(jnp.sum, masks))) / size


def _float32(values: jax.Array) -> jax.Array:
    return values.astype(jnp.float32)


def widened(param: jax.Array) -> jax.Array:
    """A float8- or float4-stored parameter as float32 (the same value); any other as it is."""
    return param.astype(jnp.float32) if jnp.finfo(param.dtype).bits <= 8 else param


def _add_nearest(params, updates):
    """p + update rounded to nearest in p's dtype (float8 takes no implicit promotion)."""

    def add(param, update):
        if jnp.finfo(param.dtype).bits <= 8:
            return (param.astype(jnp.float32) + update).astype(param.dtype)
        return optax.apply_updates(param, update)

    return jax.tree.map(add, params, updates)


def scaled_step(
    graphdef,
    params,
    x,
    y,
    policy,
    precision: Policy,
    tx,
    opt_state,
    rounded=None,
    history=None,
):
    """One scaled low-precision step of ``params`` (master float32 or stored in low precision).

    ``policy``: the loss-scale policy; ``precision``: how the step computes. ``rounded``:
    None for p + update rounded to nearest, else (rounding, its state, key) for
    ``rounding.apply_rounded``. ``history`` (a quantizing recipe only): the run's AmaxHistory,
    whose scales the step uses and which records the step. Returns (new params, new optimizer
    state, finite flag, lost-update share, new rounding state, saturated share, new history,
    flushed-update share: entries whose update was zero because their gradient underflowed).
    """
    # The values the step differentiates at: float8-stored parameters as float32 (see the rule).
    point = jax.tree.map(widened, params)
    metas = history.metas() if history is not None else ()

    def scaled_loss(point, metas):
        loss = low_precision_loss(nnx.merge(graphdef, point), x, y, precision, metas=metas)
        return policy.scale(loss.astype(jnp.float32))

    # Unscaled in float32, so the unscaling itself cannot underflow, then held in the dtype the
    # parameters are stored in: float32 for the masters, the compute dtype for the pure run, whose
    # optimizer state (momentum, Adam's moments) is therefore in the compute dtype too (float32
    # for a float8-stored run, whose point is float32).
    scaled_grads, float8_stats = jax.grad(scaled_loss, argnums=(0, 1))(point, metas)
    grads = jax.tree.map(lambda g, p: g.astype(p.dtype), policy.unscale(scaled_grads), point)
    updates, opt_state = tx.update(grads, opt_state, point)
    finite = all_finite(grads)

    # A gradient lost to zero is told from a true zero by float32's gradient at the same point,
    # computed only in a step that has a zero gradient entry (none: nothing was flushed).
    def flushed_share(_) -> jax.Array:
        reference = jax.grad(float32_mse, argnums=1)(
            graphdef, jax.tree.map(_float32, point), x, y, precision.task
        )
        masks = jax.tree.map(metrics.flushed_update_mask, grads, reference, updates)
        return _share(masks).astype(jnp.float32)

    has_zero = jnp.any(jnp.stack([jnp.any(g == 0) for g in jax.tree.leaves(grads)]))
    flushed = jax.lax.cond(has_zero, flushed_share, lambda _: jnp.float32(0), None)
    saturated = jnp.float32(0)
    if history is not None:
        totals = float8_stats.sum(axis=(0, 1))
        saturated = totals[STATS.index("saturated")] / totals[STATS.index("size")]
        history = history.record(float8_stats)
    if rounded is None:
        new_params = _add_nearest(params, updates)
        lost = _lost_share(params, new_params, updates)
        return new_params, opt_state, finite, lost, None, saturated, history, flushed
    mode, state, key = rounded
    new_params, new_state = rounding.apply_rounded(mode, params, updates, state, key)
    if state is not None:
        # A skipped step's update is zero, yet Kahan would still fold c into p: keep both.
        skip = policy.skips_nonfinite & ~finite
        new_params, new_state = jax.tree.map(
            lambda old, new: jnp.where(skip, old, new), (params, state), (new_params, new_state)
        )
    kept = rounding.unchanged(state, new_state)
    lost = _lost_share(params, new_params, updates, kept)
    return new_params, opt_state, finite, lost, new_state, saturated, history, flushed


def in_param_dtype() -> optax.GradientTransformation:
    """Hold each update in its parameter's dtype (a no-op for float32 masters).

    The pure run's update is thus a compute-dtype number, as its gradient and state are; and
    optax.apply_if_finite's two branches (update, skip) agree on dtypes.
    """

    def update(updates, state, params=None):
        return jax.tree.map(lambda u, p: u.astype(p.dtype), updates, params), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)
