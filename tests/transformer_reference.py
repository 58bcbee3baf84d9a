"""An independent float64 model of the transformer block (issue 36's specification), in plain
jax.numpy under ``jax.enable_x64``.

Written from the specification, not from ``core.model.transformer``: the sequences are cut
one by one (no padding), each head is a separate slice and product, the mask is -inf. Every value
is rounded where the step casts it: each operation's inputs, parameters and result to its kind's
dtype (``op_reference.FLOAT32_KINDS``: the rest in the compute dtype), a dense layer's product and
its bias add each rounded once. Rounding is straight-through (v + stop_gradient(round(v) - v)),
so ``jax.grad`` gives the exact float64 backward pass at the rounded forward values, as the
MLP's numpy reference does.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import op_reference

JNP = {"bfloat16": jnp.bfloat16, "float16": jnp.float16, "float32": jnp.float32}
EPSILON = 1e-6  # flax's LayerNorm default


def _rounder(dtype: str):
    def r(v):
        return v + jax.lax.stop_gradient(v.astype(JNP[dtype]).astype(jnp.float64) - v)

    return r


def _layer_norm(z, scale, bias):
    mean = z.mean(-1, keepdims=True)
    variance = jnp.maximum((z * z).mean(-1, keepdims=True) - mean**2, 0)
    return (z - mean) / jnp.sqrt(variance + EPSILON) * scale + bias


def forward(params, x, *, dtype, preset, seq_len, heads, norm, outputs_of=None):
    """y_hat (N, D_out) of the block in float64 (module rule); ``outputs_of``: a dict that
    receives each named intermediate (h after embed, the attention's o, ...)."""
    kinds = op_reference.FLOAT32_KINDS[preset]

    def rounder(kind):
        return _rounder("float32" if kind in kinds else dtype)

    rm, ra, rn, rt = (rounder(k) for k in ("matmul", "activation", "normalisation", "attention"))
    seen = outputs_of if outputs_of is not None else {}

    def dense(name, v):
        product = rm(rm(v) @ rm(params[f"{name}.kernel"]))
        return rm(product + rm(params[f"{name}.bias"]))

    def normed(index, v):
        if not norm:
            return v
        scale, bias = rn(params[f"norms.{index}.scale"]), rn(params[f"norms.{index}.bias"])
        return rn(_layer_norm(rn(v), scale, bias))

    h = dense("embed", _rounder(dtype)(x))
    seen["embed"] = h
    a = normed(0, h)
    q, k, v = (rt(dense(f"attention.{name}", a)) for name in ("query", "key", "value"))
    width = q.shape[1]
    d_head = width // heads
    pieces = []
    for start in range(0, x.shape[0], seq_len):
        rows = slice(start, start + seq_len)
        length = q[rows].shape[0]
        later = np.triu(np.ones((length, length), bool), 1)
        joined = []
        for head in range(heads):
            cols = slice(head * d_head, (head + 1) * d_head)
            scaled = rt(q[rows, cols] / rt(jnp.float64(math.sqrt(d_head))))
            scores = rt(scaled @ k[rows, cols].T)
            weights = rt(jax.nn.softmax(jnp.where(later, -jnp.inf, scores), axis=-1))
            joined.append(rt(weights @ v[rows, cols]))
        pieces.append(jnp.concatenate(joined, axis=1))
    o = jnp.concatenate(pieces, axis=0)
    seen["attention"] = o
    h = rm(h + dense("attention.out", o))
    seen["residual"] = h
    b = normed(1, h)
    g, u = dense("mlp.gate", b), dense("mlp.up", b)
    m = ra(ra(jax.nn.silu(ra(g))) * ra(u))
    seen["swiglu"] = m
    h = rm(h + dense("mlp.down", m))
    return dense("readout", h)


def loss_and_grads(params, x, y, *, dtype="float32", preset="exercise", seq_len, heads, norm):
    """(loss, {name: gradient}) of the block's MSE in float64 (numpy float64 arrays out)."""
    with jax.enable_x64(True):
        rl = _rounder("float32" if "loss" in op_reference.FLOAT32_KINDS[preset] else dtype)
        wide = {name: jnp.asarray(value, jnp.float64) for name, value in params.items()}
        x64, y64 = jnp.asarray(x, jnp.float64), jnp.asarray(y, jnp.float64)

        def loss(p):
            out = forward(
                p, x64, dtype=dtype, preset=preset, seq_len=seq_len, heads=heads, norm=norm
            )
            return rl(jnp.mean((rl(out) - rl(y64)) ** 2))

        value, grads = jax.jit(jax.value_and_grad(loss))(wide)
        return float(value), {name: np.asarray(g, np.float64) for name, g in grads.items()}
