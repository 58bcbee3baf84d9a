"""One pre-norm transformer block over sequences of batch rows (the registry's sequence model).

Rule (the agreed specification of issue 36). The N rows of x are N tokens; rows 0..T-1 form the
first sequence of ``seq_len`` = T tokens, rows T..2T-1 the second, and so on; when T does not
divide N the last sequence is shorter: the attention pads the rows to a multiple of T with zeros,
runs, and drops the padded rows (under the causal mask padded tokens sit at a sequence's tail and
never reach a real token, so nothing depends on the padding). With d = ``hidden_width`` (d_model),
d_ff = 2 d (the SwiGLU's gated width) and d_head = d / ``heads``, the parameters are nnx.Linear
layers with Flax's default initializers and a bias, created in this order from one nnx.Rngs::

    embed (D_in -> d), attention.query, .key, .value, .out (d -> d), mlp.gate, mlp.up
    (d -> d_ff), mlp.down (d_ff -> d), readout (d -> D_out); with norm = layernorm, then
    norms.0 and norms.1 (nnx.LayerNorm(d), float32 scale and bias), after the linears

and the forward pass is, operation by operation (``transformer_operations``: name, kind, the
prefix of its parameters), each cast on entry to its kind's dtype and watched at its end::

    embed             matmul         h = x We + be
    norms.0           normalisation  a = LN(h)                     (norm = none: a = h)
    attention.query   matmul         q = a Wq + bq   (and .key: k, .value: v)
    attention scores  attention      s = (q / sqrt(d_head)) . k per head and sequence (flax's
                                     dot_product_attention order: the query scaled first),
                                     causal: a later key's entry set to the dtype's lowest
                                     finite value (flax's mask rule)
    softmax           attention      p = softmax(s) over the keys
    attention values  attention      o = p . v, the heads joined back to (rows, d)
    attention.out     matmul         h = h + (o Wo + bo)           (the add in the matmul dtype)
    norms.1           normalisation  b = LN(h)                     (norm = none: b = h)
    mlp.gate, mlp.up  matmul         g = b Wg + bg, u = b Wu + bu
    swiglu            activation     m = silu(g) * u
    mlp.down          matmul         h = h + (m Wd + bd)
    readout           matmul         y_hat = h Wr + br

Every nnx.Linear is applied to a 2-D (rows, features) array, so every recipe's matmul (its
dot_general, per-tensor float8 or block-scaled, and an emulated accumulation) applies to it
unchanged; the attention's two contractions are ``jnp.einsum`` in the attention dtype (XLA's own
accumulation; the ``accumulation`` setting is the dense matmuls'). The hidden activations (the
probes' places) are h after embed (d), h after the attention's residual (d) and m (d_ff); a
probe is added in its activation's own dtype.

Work per batch row (the cost model's unit): the dense matmuls' fan_in x fan_out, plus the
attention's 2 x T x d (scores and values), from ``transformer_layout``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from playground.core.model.op_policy import EXERCISE_OPS, OpRun
from playground.core.model.parts import Operation, layer_norm

LAYERNORM = "layernorm"
# The ranges of the seq_len and heads settings.
MAX_SEQ_LEN = 64
MAX_HEADS = 8
# The SwiGLU's gated width per unit of d_model.
FF_FACTOR = 2


def ff_width(choice: Any) -> int:
    """d_ff, the SwiGLU's gated width: FF_FACTOR x d_model."""
    return FF_FACTOR * choice.hidden_width


def head_counts(width: int, most: int) -> list[int]:
    """The head counts in 1..most that divide ``width`` (d_head a whole number)."""
    return [heads for heads in range(1, most + 1) if width % heads == 0]


class Attention(nnx.Module):
    """Multi-head causal self-attention: query, key, value and out projections (d -> d)."""

    def __init__(self, d: int, rngs: nnx.Rngs):
        self.query = nnx.Linear(d, d, rngs=rngs)
        self.key = nnx.Linear(d, d, rngs=rngs)
        self.value = nnx.Linear(d, d, rngs=rngs)
        self.out = nnx.Linear(d, d, rngs=rngs)

    def mix(self, a: jax.Array, ops: OpRun, seq_len: int, heads: int) -> jax.Array:
        """o (rows, d) of the module rule's attention (scores, softmax, values), before ``out``."""
        q, k, v = (ops.watch(layer(ops.cast("matmul", a))) for layer in self.projections)
        rows, d = q.shape
        padded = -(-rows // seq_len) * seq_len

        def split(t: jax.Array) -> jax.Array:
            t = jnp.pad(ops.cast("attention", t), ((0, padded - rows), (0, 0)))
            return t.reshape(padded // seq_len, seq_len, heads, d // heads)

        q, k, v = split(q), split(k), split(v)
        dtype = q.dtype
        q = q / jnp.sqrt(d // heads).astype(dtype)
        scores = jnp.einsum("sqhd,skhd->shqk", q, k)
        causal = jnp.tril(jnp.ones((seq_len, seq_len), bool))
        scores = ops.watch(jnp.where(causal, scores, jnp.finfo(dtype).min))
        weights = ops.watch(jax.nn.softmax(ops.cast("attention", scores), axis=-1))
        values = jnp.einsum("shqk,skhd->sqhd", ops.cast("attention", weights), v)
        return ops.watch(values.reshape(padded, d)[:rows])

    @property
    def projections(self) -> tuple[nnx.Linear, nnx.Linear, nnx.Linear]:
        return (self.query, self.key, self.value)


class SwiGLU(nnx.Module):
    """The gated MLP: gate and up (d -> d_ff), silu(gate) * up, down (d_ff -> d)."""

    def __init__(self, d: int, d_ff: int, rngs: nnx.Rngs):
        self.gate = nnx.Linear(d, d_ff, rngs=rngs)
        self.up = nnx.Linear(d, d_ff, rngs=rngs)
        self.down = nnx.Linear(d_ff, d, rngs=rngs)


class Transformer(nnx.Module):
    """The block of the module rule: embed, attention, SwiGLU MLP, readout (pre-norm)."""

    def __init__(self, d_in: int, d_out: int, rngs: nnx.Rngs, choice: Any):
        d = choice.hidden_width
        self.embed = nnx.Linear(d_in, d, rngs=rngs)
        self.attention = Attention(d, rngs)
        self.mlp = SwiGLU(d, ff_width(choice), rngs)
        self.readout = nnx.Linear(d, d_out, rngs=rngs)
        if choice.norm == LAYERNORM:
            self.norms = nnx.List(
                [nnx.LayerNorm(d, param_dtype=jnp.float32, rngs=rngs) for _ in range(2)]
            )
        else:
            self.norms = None
        self.seq_len = choice.seq_len
        self.heads = choice.heads

    def _norm(self, index: int, h: jax.Array, ops: OpRun) -> jax.Array:
        return h if self.norms is None else layer_norm(self.norms[index], h, ops)

    def __call__(
        self, x: jax.Array, probes: Sequence[jax.Array] = (), ops: OpRun | None = None
    ) -> jax.Array:
        if ops is None:  # every operation in x's dtype
            ops = OpRun(EXERCISE_OPS, str(x.dtype))

        def probed(value: jax.Array, index: int) -> jax.Array:
            return value + probes[index].astype(value.dtype) if probes else value

        h = probed(ops.watch(self.embed(ops.cast("matmul", x))), 0)
        o = self.attention.mix(self._norm(0, h, ops), ops, self.seq_len, self.heads)
        mixed = self.attention.out(ops.cast("matmul", o))
        h = probed(ops.watch(ops.cast("matmul", h) + mixed), 1)
        b = self._norm(1, h, ops)
        g = ops.watch(self.mlp.gate(ops.cast("matmul", b)))
        u = ops.watch(self.mlp.up(ops.cast("matmul", b)))
        m = ops.cast("activation", g)
        m = probed(ops.watch(jax.nn.silu(m) * ops.cast("activation", u)), 2)
        down = self.mlp.down(ops.cast("matmul", m))
        h = ops.watch(ops.cast("matmul", h) + down)
        return ops.watch(self.readout(ops.cast("matmul", h)))


def transformer_operations(choice: Any) -> tuple[Operation, ...]:
    """The block's operations in forward order (the module rule's table)."""
    norm = choice.norm == LAYERNORM

    def normalisation(index: int) -> tuple[Operation, ...]:
        return (Operation(f"norms.{index}", "normalisation", f"norms.{index}."),) if norm else ()

    def dense(name: str) -> Operation:
        return Operation(name, "matmul", f"{name}.")

    return (
        dense("embed"),
        *normalisation(0),
        dense("attention.query"),
        dense("attention.key"),
        dense("attention.value"),
        Operation("attention scores", "attention", None),
        Operation("softmax", "attention", None),
        Operation("attention values", "attention", None),
        dense("attention.out"),
        *normalisation(1),
        dense("mlp.gate"),
        dense("mlp.up"),
        Operation("swiglu", "activation", None),
        dense("mlp.down"),
        dense("readout"),
    )


def transformer_hidden(choice: Any) -> tuple[int, ...]:
    """The widths of the hidden activations: h after embed, h after attention, m."""
    return (choice.hidden_width, choice.hidden_width, ff_width(choice))


def transformer_dense(choice: Any, d_in: int, d_out: int) -> tuple[tuple[int, int], ...]:
    """(fan_in, fan_out) of every dense matmul, in forward order."""
    d, d_ff = choice.hidden_width, ff_width(choice)
    return ((d_in, d), *[(d, d)] * 4, (d, d_ff), (d, d_ff), (d_ff, d), (d, d_out))


def attention_work(choice: Any) -> int:
    """Multiply-adds per token of the attention's two contractions: 2 x T x d (an upper bound:
    a token attends to at most T keys)."""
    return 2 * choice.seq_len * choice.hidden_width


def attention_kept(choice: Any) -> tuple[tuple[str, int], ...]:
    """(kind, entries per token) the backward pass keeps besides the dense layers' inputs: the
    scores and softmax weights (heads x T each), and the SwiGLU's g and u (d_ff each)."""
    return (("attention", 2 * choice.heads * choice.seq_len), ("activation", 2 * ff_width(choice)))


def normalised_width(choice: Any) -> int:
    """Entries per token the two layer norms normalise (2 d), or none."""
    return 2 * choice.hidden_width if choice.norm == LAYERNORM else 0
