"""Precision per operation: which dtype each kind of operation of a step computes in.

Rule: an operation of the step is one of five kinds (``KINDS``). A preset (``OpPolicy``, one
entry of ``PRESETS``, the ``precision_policy`` setting) names the kinds that compute in float32;
every other kind computes in the recipe's compute dtype (its ``cast_dtype``). An operation casts
its inputs to its kind's dtype on entry and returns its result in that dtype, so the next one
casts again::

    matmul         the dense layers: operands (input, kernel, bias) and result
    activation     relu / gelu / tanh, and the transformer's SwiGLU (silu(g) * u)
    normalisation  a layer norm (the MLP's, the transformer's two): statistics (mean,
                   E[x^2] - mean^2), scale and bias
    loss           the MSE, or the softmax cross-entropy (a max-subtracted log_softmax)
    attention      the transformer's attention scores (q / sqrt(d_head) . k, causal mask), their
                   softmax and the weighted values: what torch's scaled_dot_product_attention
                   computes inside its fused kernel

    exercise               nothing in float32: every operation in the compute dtype (the seed
                           exercise's step, and the default: today's numbers bit for bit)
    autocast               normalisation, loss and attention in float32: what PyTorch 2.13's
                           CPU autocast does (below)
    all_float32_but_matmul activation, normalisation, loss and attention in float32: only the
                           dense matmuls low

What ``autocast`` copies from torch 2.13.0 (CPU, bfloat16 or float16; ``TORCH_AUTOCAST`` holds
the names and ``tests/core/model/test_autocast_torch.py`` checks them against the installed torch):
``linear`` and ``matmul`` are on its lower-precision list; ``mse_loss`` and ``cross_entropy``
(whose log_softmax therefore runs in float32) on its float32 list; ``layer_norm`` is on neither
list on CPU, but its CPU kernel computes the statistics and the normalised values in float32 and
rounds only its output to the input's dtype, which the next operation (an activation, low)
casts to anyway; the activations are on neither list and run in their input's (low) dtype.
Called on their own, torch's CPU ``softmax`` and ``log_softmax`` stay low (they are on the float32
list of CUDA autocast, not of CPU autocast). ``scaled_dot_product_attention`` is on CPU autocast's
lower-precision list: it takes q, k, v low (they come from the linears, low anyway) and returns
a low output, but its CPU kernel computes the scores and their softmax in float32 and rounds only
its output: float16 q, k whose scaled dot products pass 65504 give a finite output, and its
error against the float32 attention is within the one rounding of its output (at most eps / 2
in norm; the same three steps computed low err more). So the attention
kind (scores, softmax, values) is float32 under ``autocast``, and the next operation
(attention.out, a matmul) rounds its result to the low dtype on entry, as torch's output is.
(CUDA autocast differs: softmax is on its float32 list and sdpa on its lower one, whose flash
and memory-efficient kernels accumulate in float32 too.)

Example::

    >>> autocast = PRESETS["autocast"]
    >>> autocast.dtype("loss", "bfloat16"), autocast.dtype("matmul", "float16")
    ('float32', 'float16')
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp

KINDS = ("matmul", "activation", "normalisation", "loss", "attention")
FLOAT32 = "float32"


@dataclass(frozen=True)
class OpPolicy:
    """One preset: the kinds of operation computed in float32 (the rest in the compute dtype).

    Frozen and hashable: part of the step's ``Policy``, a static argument of every program.
    """

    name: str
    float32_kinds: frozenset[str]
    about: str

    def __post_init__(self) -> None:
        unknown = set(self.float32_kinds) - set(KINDS)
        if unknown:
            raise ValueError(f"operation kinds must be among {', '.join(KINDS)}; got {unknown}")

    def dtype(self, kind: str, compute_dtype: str) -> str:
        """The dtype operations of ``kind`` compute in, under a recipe casting to compute_dtype."""
        if kind not in KINDS:
            raise ValueError(f"an operation kind is one of {', '.join(KINDS)}; got {kind!r}")
        return FLOAT32 if kind in self.float32_kinds else compute_dtype


PRESETS: dict[str, OpPolicy] = {
    preset.name: preset
    for preset in (
        OpPolicy("exercise", frozenset(), "every operation in the compute dtype (the exercise)"),
        OpPolicy(
            "autocast",
            frozenset({"normalisation", "loss", "attention"}),
            "matmuls and activations low; layer norm, loss (with its log_softmax) and attention "
            "(scores, softmax, values: sdpa's kernel) in float32, as torch 2.13's CPU autocast",
        ),
        OpPolicy(
            "all_float32_but_matmul",
            frozenset({"activation", "normalisation", "loss", "attention"}),
            "only the matmuls low; everything between them in float32",
        ),
    )
}
PRECISION_POLICIES = tuple(PRESETS)
EXERCISE_OPS = PRESETS["exercise"]

# What the autocast preset copies from torch 2.13.0's CPU autocast (see the module rule).
TORCH_VERSION = "2.13.0"
TORCH_AUTOCAST = {
    # scaled_dot_product_attention returns low, but its CPU kernel's scores and softmax are
    # float32 (tests/core/model/test_autocast_torch.py checks both).
    "lower_precision": ("linear", "matmul", "scaled_dot_product_attention"),
    "float32": ("mse_loss", "cross_entropy"),
    # On no list on CPU: run in their input's dtype (layer_norm's statistics in float32 inside).
    "neither": ("layer_norm", "softmax", "log_softmax", "relu", "gelu", "tanh"),
}


def preset(name: str) -> OpPolicy:
    """The preset registered as ``name``; ValueError naming the setting and its choices."""
    if name not in PRESETS:
        raise ValueError(f"precision_policy must be one of {', '.join(PRESETS)}; got {name!r}")
    return PRESETS[name]


@jax.custom_vjp
def tap(value: jax.Array, flag: jax.Array) -> jax.Array:
    """``value`` unchanged; the gradient with respect to the scalar ``flag`` is 1.0 when the
    gradient arriving at ``value`` holds an inf or a NaN, else 0.0 (a backward finiteness check
    at an operation's boundary, read like any other gradient)."""
    del flag
    return value


def _tap_forward(value, flag):
    return value, None


def _tap_backward(_, cotangent):
    nonfinite = jnp.any(~jnp.isfinite(cotangent.astype(jnp.float32)))
    return cotangent, nonfinite.astype(jnp.float32)


tap.defvjp(_tap_forward, _tap_backward)


class OpRun:
    """One forward pass's casts and checks, handed to the model (built inside the trace).

    ``cast(kind, x)``: x in the kind's dtype. ``watch(value, finite=None)``: the end of the next
    operation (in the model registry's ``operations`` order): records whether ``value`` (and
    ``finite``, an extra check such as a norm's variance) is all finite and taps it for the
    backward check with ``flags[index]``. Without flags nothing is recorded or tapped.
    """

    def __init__(self, ops: OpPolicy, compute_dtype: str, flags: jax.Array | None = None):
        self.ops = ops
        self.compute_dtype = compute_dtype
        self.flags = flags
        self.forward_finite: list[jax.Array] = []

    def dtype(self, kind: str) -> str:
        return self.ops.dtype(kind, self.compute_dtype)

    def cast(self, kind: str, values: jax.Array) -> jax.Array:
        return values.astype(self.dtype(kind))

    def watch(self, value: jax.Array, finite: jax.Array | None = None) -> jax.Array:
        if self.flags is None:
            return value
        check = jnp.all(jnp.isfinite(value))
        if finite is not None:
            check = check & finite
        index = len(self.forward_finite)
        self.forward_finite.append(check)
        return tap(value, self.flags[index])


class Watched(NamedTuple):
    """A watched forward pass (``Policy.watched_loss``): the loss in the loss dtype, each
    operation's forward finiteness (bool: the model's ``operations``, then the loss; empty
    unless watched), and the loss of the same outputs computed in the compute dtype and in
    float32 (both returned as float32, no gradient)."""

    loss: jax.Array
    forward_finite: jax.Array
    loss_in_compute_dtype: jax.Array
    loss_in_float32: jax.Array
