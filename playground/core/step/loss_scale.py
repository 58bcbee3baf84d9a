"""Loss scaling as small objects, shared by the step and the training dynamics (as in jmp).

Each policy has the same three operations, on a pytree of arrays::

    scaled_loss = policy.scale(loss)          # loss * S before differentiation
    grads       = policy.unscale(scaled)      # scaled gradients / S, in float32
    policy      = policy.adjust(grads_finite) # the policy for the next step

and ``skips_nonfinite`` says whether a step with non-finite gradients is skipped.

    NoOpLossScale     S = 1, never changes, never skips
    StaticLossScale   S fixed (the exercise); overflowed gradients reach the update unchanged
    DynamicLossScale  jmp.DynamicLossScale's rule (torch.amp.GradScaler's, too):
                        if the gradients are finite:
                            counter += 1
                            if counter == period:
                                counter = 0
                                if S * factor is finite: S *= factor   # never grows to inf
                        else:
                            skip the update; S = max(S / factor, min_loss_scale); counter = 0

The floor of a back-off is ``min(1, starting S)``: jmp's and GradScaler's floor of 1, except
that a back-off never *raises* a scale that started below 1 (jmp would lift 2^-10 to 1). The
ceiling is the largest finite float32 power of two reached by doubling, 2^127 from a power of
two, as in jmp; unscaling divides, so it stays exact there (a reciprocal 2^-127 would be a
float32 subnormal, which XLA on CPU flushes to zero).

The policies are pytrees (``jax.tree_util.register_dataclass``): the scale, the counter and the
period are traced values, so one compiled program serves every starting scale and period.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

GROWTH_FACTOR = 2.0  # torch GradScaler growth_factor (its backoff_factor is 1 / 2); jmp factor
MIN_LOSS_SCALE = 1.0  # jmp min_loss_scale; a scale that starts lower keeps its own floor


def _scale_tree(tree: Any, factor: jax.Array) -> Any:
    return jax.tree.map(lambda leaf: leaf * factor, tree)


def _unscale_tree(tree: Any, scale: jax.Array) -> Any:
    return jax.tree.map(lambda leaf: leaf.astype(jnp.float32) / scale, tree)


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class NoOpLossScale:
    """No scaling: S = 1."""

    skips_nonfinite = False

    @property
    def loss_scale(self) -> jax.Array:
        return jnp.float32(1.0)

    def scale(self, tree: Any) -> Any:
        return tree

    def unscale(self, tree: Any) -> Any:
        return jax.tree.map(lambda leaf: leaf.astype(jnp.float32), tree)

    def adjust(self, grads_finite: jax.Array) -> NoOpLossScale:
        del grads_finite
        return self


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class StaticLossScale:
    """A fixed scale S, as in the exercise."""

    loss_scale: jax.Array
    skips_nonfinite = False

    def scale(self, tree: Any) -> Any:
        return _scale_tree(tree, self.loss_scale)

    def unscale(self, tree: Any) -> Any:
        return _unscale_tree(tree, self.loss_scale)

    def adjust(self, grads_finite: jax.Array) -> StaticLossScale:
        del grads_finite
        return self


@jax.tree_util.register_dataclass
@dataclasses.dataclass(frozen=True)
class DynamicLossScale:
    """Grow S by ``factor`` after ``period`` finite steps; halve it and skip on an overflow."""

    loss_scale: jax.Array
    counter: jax.Array
    period: jax.Array
    min_loss_scale: jax.Array
    factor: float = dataclasses.field(default=GROWTH_FACTOR, metadata={"static": True})
    skips_nonfinite = True

    def scale(self, tree: Any) -> Any:
        return _scale_tree(tree, self.loss_scale)

    def unscale(self, tree: Any) -> Any:
        return _unscale_tree(tree, self.loss_scale)

    def adjust(self, grads_finite: jax.Array) -> DynamicLossScale:
        counter = jnp.where(grads_finite, self.counter + 1, 0)
        grow = counter >= self.period
        grown = self.loss_scale * self.factor
        loss_scale = jnp.where(
            grads_finite,
            jnp.where(grow & jnp.isfinite(grown), grown, self.loss_scale),
            jnp.maximum(self.loss_scale / self.factor, self.min_loss_scale),
        )
        return dataclasses.replace(self, loss_scale=loss_scale, counter=jnp.where(grow, 0, counter))


LossScale = NoOpLossScale | StaticLossScale | DynamicLossScale


def make_loss_scale(mode: str, loss_scale: Any, period: Any = 1) -> LossScale:
    """The policy of a scaling mode ('none', 'static' or 'dynamic'), starting at ``loss_scale``."""
    if mode == "none":
        return NoOpLossScale()
    if mode == "static":
        return StaticLossScale(jnp.asarray(loss_scale, jnp.float32))
    if mode == "dynamic":
        start = jnp.asarray(loss_scale, jnp.float32)
        floor = jnp.minimum(jnp.float32(MIN_LOSS_SCALE), start)
        return DynamicLossScale(start, jnp.int32(0), jnp.asarray(period, jnp.int32), floor)
    raise ValueError(f"mode must be one of none, static, dynamic; got {mode!r}")


def all_finite(tree: Any) -> jax.Array:
    """True when every entry of every leaf is finite."""
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree.leaves(tree)]))
