"""The pieces the models of the registry share: an operation's entry and the layer norm.

Rule: an :class:`Operation` names one operation of a model's forward pass (its name, its kind in
``op_policy.KINDS`` and the prefix of the parameters it uses). ``layer_norm`` computes, in the
normalisation dtype of an ``OpRun``, flax's own rule (mean, E[x^2] - mean^2 clipped at 0,
(x - mean) * rsqrt(var + epsilon) * scale + bias): in float32 it is ``nnx.LayerNorm``'s own call;
flax computes its statistics in at least float32 whatever it is given, so in a low dtype the
playground writes the same rule out, and there x^2 overflows float16 once |x| passes 256 (the
variance is then inf; its check names the norm).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from playground.core.model.op_policy import OpRun


class Operation(NamedTuple):
    """One operation of a model's forward pass: its name, its kind (``op_policy.KINDS``) and the
    prefix of the parameters it uses ('' for the linear model's kernel and bias; None: none)."""

    name: str
    kind: str
    params: str | None


def layer_norm(norm: nnx.LayerNorm, x: jax.Array, ops: OpRun) -> jax.Array:
    """``norm`` applied to x in the normalisation dtype of ``ops``, watched (module rule)."""
    dtype = ops.dtype("normalisation")
    x = x.astype(dtype)
    if jnp.dtype(dtype) == jnp.float32:
        return ops.watch(norm(x))  # flax's own: statistics and result in float32
    scale, bias = norm.scale[...].astype(dtype), norm.bias[...].astype(dtype)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    mean_square = jnp.mean(x * x, axis=-1, keepdims=True)
    variance = jnp.maximum(0, mean_square - mean * mean)
    normalized = (x - mean) * (jax.lax.rsqrt(variance + norm.epsilon) * scale) + bias
    return ops.watch(normalized, jnp.all(jnp.isfinite(variance)))
