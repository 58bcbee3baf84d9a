"""The forward pass of a step under a precision policy, watched operation by operation.

Rule, for a temporary model (parameters already cast by the policy), inputs in the compute
dtype and targets y::

    outputs = the model's operations in order, each in its kind's dtype (``models.forward``)
    loss    = TASK_LOSSES[task](outputs, y), both cast to the loss dtype, watched as the last
              operation
    and, for the same outputs (no gradient): the loss computed in the compute dtype and the loss
    computed in float32, so the rounding of the loss itself can be read off.

With ``flags`` (zeros, one per operation including the loss) every operation's result is checked
for inf and NaN on the way forward and tapped (``op_policy.tap``), so the gradient with respect
to flags[i] is 1 where the gradient arriving at operation i's result is not finite.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from playground.core.model.losses import TASK_LOSSES
from playground.core.model.models import forward
from playground.core.model.op_policy import FLOAT32, OpRun, Watched


def watched_pass(
    policy: Any,
    temporary: nnx.Module,
    inputs: jax.Array,
    y: jax.Array,
    probes: tuple = (),
    flags: jax.Array | None = None,
) -> Watched:
    """The rule above for ``policy`` (a ``core.step.policy.Policy``); returns a Watched."""
    compute_dtype = policy.compute.cast_dtype
    ops = OpRun(policy.ops, compute_dtype, flags)
    outputs = forward(temporary, inputs, probes, ops)
    task_loss = TASK_LOSSES[policy.task]
    loss = ops.watch(task_loss(ops.cast("loss", outputs), ops.cast("loss", y)))

    def loss_in(dtype: str) -> jax.Array:
        same = jax.lax.stop_gradient(outputs)
        return task_loss(same.astype(dtype), y.astype(dtype)).astype(FLOAT32)

    finite = jnp.stack(ops.forward_finite) if ops.forward_finite else jnp.zeros((0,), bool)
    return Watched(loss, finite, loss_in(compute_dtype), loss_in(FLOAT32))
