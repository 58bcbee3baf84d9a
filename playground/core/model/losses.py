"""The step's loss by task: what the ``task`` setting chooses.

Rule, for the model's outputs and the targets y, both already in the loss dtype (the precision
policy's, ``playground.core.step.policy``)::

    regression      mean((outputs - y) ** 2)                          # the exercise's MSE
    classification  -mean(sum(y * log_softmax(outputs), axis=-1))     # softmax cross-entropy

For classification y holds one-hot rows (``core.data.synthetic``) and the outputs are logits.
The softmax is max-subtracted (``jax.nn.log_softmax``: x - max - log(sum(exp(x - max)))), so
its exp never overflows, whatever the logits; in a low dtype the loss still rounds to that
dtype's precision, and a logit past the dtype's largest value is inf before the loss sees it.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

TASK_LOSSES: dict[str, Callable[[jax.Array, jax.Array], jax.Array]] = {
    "regression": lambda outputs, y: jnp.mean((outputs - y) ** 2),
    "classification": lambda logits, y: (
        -jnp.mean(jnp.sum(y * jax.nn.log_softmax(logits, axis=-1), axis=-1))
    ),
}
TASKS = tuple(TASK_LOSSES)
# The loss's name in the operations table.
LOSS_NAMES = {"regression": "mse", "classification": "softmax cross-entropy"}
