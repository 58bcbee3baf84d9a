"""The float8 recipe: matmuls with E4M3 operands, E5M2 gradients and per-tensor scales.

Rule (the FP8 formats paper's hybrid recipe, as NVIDIA TransformerEngine runs it). Every matmul
``out = lhs @ rhs`` of the model (each ``nnx.Linear``; ``lhs`` is its input, ``rhs`` its kernel)
becomes::

    forward   a = cast_e4m3(lhs * s_input)      b = cast_e4m3(rhs * s_kernel)
              out = (a @ b accumulated in float32) / s_input / s_kernel
    backward  g = cast_e5m2(d_out * s_gradient)  # d_out: the gradient arriving at `out`
              d_lhs = (g @ b.T in float32) / s_gradient / s_kernel
              d_rhs = (a.T @ g in float32) / s_input / s_gradient

An emulated ``accumulation`` (``core.formats.accumulation``) accumulates the three products
instead, before the scales divide them. Everything else (the bias, the activations, the loss,
the loss scale, the unscaling) stays in float32, as TransformerEngine keeps it in higher
precision. The casts saturate
(``dtypes.saturating_cast``): a finite value beyond the format's largest is clipped to it, as
TransformerEngine does, where a plain cast to float8_e4m3fn (which has no infinity) gives NaN.

The backward rule is a ``jax.custom_vjp``: JAX's own derivative of ``x.astype(float8_e4m3fn)``
rounds the cotangent to E4M3 too, whose smallest subnormal is 2^-9, so a 1e-4 gradient silently
becomes 0; here the gradient is rounded to E5M2 (smallest subnormal 2^-16) and survives.

Per-tensor scales s, by the ``fp8_scaling`` setting (fmax: the format's largest value; amax: the
largest |entry| of the unscaled tensor)::

    none     s = 1
    current  s = fmax / amax of this tensor now (TransformerEngine's current scaling, margin 0)
    delayed  s = fmax / max(amax over the last `amax_history` steps), computed after each step
             for the next one (TransformerEngine's DelayedScaling, amax_compute_algo "max")

In both scaled modes an amax of 0, inf or NaN keeps the previous scale (1 for current scaling
and for a fresh history), and an infinite fmax / amax becomes float32's largest value, as in
TransformerEngine. A fresh history has no past: the first step under delayed scaling uses
TransformerEngine's initial scale 1, exactly like ``none``; from the second step on the history
decides (``AmaxHistory``). The step report shows that first step; the training dynamics carry
the history from step to step.

Statistics leave the backward pass through ``meta``, one (roles, STATS) array per matmul: its
``scale`` column carries the delayed scales in, and its gradient is the measured statistics of
the three tensors (the trick Flax's own fp8 ops use to carry amax histories out of a backward
pass).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from playground.core.formats.accumulation import Accumulation, matmul
from playground.core.formats.dtypes import dtype_facts, numpy_dtype, saturating_cast

SCALINGS = ("none", "current", "delayed")
# The recipe's formats: E4M3 (more precision) forward, E5M2 (more range) for gradients.
FORWARD_FORMAT, GRADIENT_FORMAT = "float8_e4m3fn", "float8_e5m2"
# The three tensors of one matmul, and the format each is cast to.
ROLES = ("input", "kernel", "gradient")
ROLE_FORMATS = {"input": FORWARD_FORMAT, "kernel": FORWARD_FORMAT, "gradient": GRADIENT_FORMAT}
ROLE_DTYPES = {fmt: numpy_dtype(fmt) for fmt in (FORWARD_FORMAT, GRADIENT_FORMAT)}
# Per tensor: amax (before scaling), the scale used, entries saturated (finite, yet a plain
# cast would overflow them: NaN in E4M3FN, inf in E5M2; the saturating cast gives +-fmax),
# nonzero entries that became 0 (flushed), and all entries.
STATS = ("amax", "scale", "saturated", "flushed", "size")
AMAX, SCALE = STATS.index("amax"), STATS.index("scale")
# The longest amax history a run may ask for (the amax_history setting's upper limit).
HISTORY_CAPACITY = 1024
FLOAT32_MAX = float(np.finfo(np.float32).max)


def scale_from_amax(amax: jax.Array, fmt: str | jax.Array, previous: jax.Array) -> jax.Array:
    """fmax / amax, or ``previous`` where amax is 0 or not finite; an infinite ratio becomes
    float32's largest value. ``fmt`` is a format name or an array of fmax values."""
    fmax = dtype_facts(fmt).max if isinstance(fmt, str) else fmt
    ratio = jnp.asarray(fmax, jnp.float32) / amax
    ratio = jnp.where(jnp.isinf(ratio), FLOAT32_MAX, ratio)
    return jnp.where((amax > 0) & jnp.isfinite(amax), ratio, previous).astype(jnp.float32)


def quantize(values: jax.Array, fmt: str, scale: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(saturating_cast(values * scale) in ``fmt``, the tensor's STATS as a float32 vector)."""
    values = values.astype(jnp.float32)
    scaled = values * scale
    quantized = saturating_cast(scaled, fmt, jnp)
    # Counted by the plain cast itself: a value just above fmax that rounds to it is no loss.
    beyond = jnp.isfinite(scaled) & ~jnp.isfinite(scaled.astype(ROLE_DTYPES[fmt]))
    lost = (values != 0) & jnp.isfinite(values) & (quantized == 0)
    stats = (jnp.max(jnp.abs(values)), scale, jnp.sum(beyond), jnp.sum(lost), values.size)
    return quantized, jnp.stack([jnp.asarray(s, jnp.float32) for s in stats])


def _scale(values: jax.Array, role: str, scaling: str, meta: jax.Array) -> jax.Array:
    """The scale of one tensor under ``scaling`` (see the module rule)."""
    if scaling == "none":
        return jnp.float32(1)
    if scaling == "current":
        amax = jnp.max(jnp.abs(values.astype(jnp.float32)))
        return scale_from_amax(amax, ROLE_FORMATS[role], jnp.float32(1))
    return meta[ROLES.index(role), SCALE]


def _product(a, b, a_scale, b_scale, accumulation: Accumulation | None = None) -> jax.Array:
    """a @ b of two float8 arrays, accumulated in float32 (or by an emulated
    ``accumulation``, ``core.formats.accumulation``), divided by both scales."""
    if accumulation is None:
        return jnp.dot(a, b, preferred_element_type=jnp.float32) / a_scale / b_scale
    return matmul(a, b, accumulation) / a_scale / b_scale


def _matmul_forward(lhs, rhs, meta, scaling, accumulation=None):
    a, input_stats = quantize(lhs, ROLE_FORMATS["input"], _scale(lhs, "input", scaling, meta))
    b, kernel_stats = quantize(rhs, ROLE_FORMATS["kernel"], _scale(rhs, "kernel", scaling, meta))
    out = _product(a, b, input_stats[SCALE], kernel_stats[SCALE], accumulation)
    return out, (a, b, input_stats, kernel_stats, meta)


def _matmul_backward(scaling, accumulation, residuals, d_out):
    a, b, input_stats, kernel_stats, meta = residuals
    scale = _scale(d_out, "gradient", scaling, meta)
    g, gradient_stats = quantize(d_out, ROLE_FORMATS["gradient"], scale)
    d_lhs = _product(g, b.T, scale, kernel_stats[SCALE], accumulation)
    d_rhs = _product(a.T, g, input_stats[SCALE], scale, accumulation)
    return d_lhs, d_rhs, jnp.stack([input_stats, kernel_stats, gradient_stats])


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def float8_matmul(
    lhs: jax.Array,
    rhs: jax.Array,
    meta: jax.Array,
    scaling: str,
    accumulation: Accumulation | None = None,
) -> jax.Array:
    """(N, K) @ (K, M) by the module rule, in float32 (each product accumulated by
    ``accumulation`` when given); the gradient of ``meta`` is the STATS of (input, kernel,
    gradient)."""
    return _matmul_forward(lhs, rhs, meta, scaling, accumulation)[0]


float8_matmul.defvjp(_matmul_forward, _matmul_backward)


def float8_dot_general(
    lhs,
    rhs,
    dimension_numbers,
    precision=None,
    preferred_element_type=None,
    out_sharding=None,
    *,
    meta: jax.Array,
    scaling: str,
    accumulation: Accumulation | None = None,
):
    """``nnx.Linear``'s dot_general, for the one contraction Linear does on a 2-D batch."""
    del precision, preferred_element_type, out_sharding  # float32 or ``accumulation``
    if lhs.ndim != 2 or tuple(map(tuple, dimension_numbers[0])) != ((1,), (0,)):
        raise ValueError("the float8 matmul takes a 2-D batch times a kernel")
    return float8_matmul(lhs, rhs, meta, scaling, accumulation)


def matmul_layers(model: nnx.Module) -> list[tuple[str, nnx.Linear]]:
    """(kernel name, layer) of every nnx.Linear in ``model``, in parameter order."""
    layers = [(path, m) for path, m in nnx.iter_modules(model) if isinstance(m, nnx.Linear)]
    return [(".".join(map(str, (*path, "kernel"))), m) for path, m in sorted(layers)]


_ROLE_MAX = np.array([dtype_facts(ROLE_FORMATS[role]).max for role in ROLES], np.float32)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class AmaxHistory:
    """Per quantized tensor (layer, role): its past amax values and the scale for the next step.

    amax: (layers, roles, HISTORY_CAPACITY), most recent first; only the first ``length``
      entries count (``length`` is traced, so one program serves every history length).
    scale: (layers, roles), the delayed scale the next step uses (1 when fresh).

    ``record(stats)`` after a step: push each tensor's amax, then
    scale = scale_from_amax(max of the last ``length`` amax values, fmax, previous scale).
    """

    amax: jax.Array
    scale: jax.Array
    length: jax.Array

    @classmethod
    def fresh(cls, layers: int, length: int | jax.Array = 1) -> AmaxHistory:
        return cls(
            amax=jnp.zeros((layers, len(ROLES), HISTORY_CAPACITY), jnp.float32),
            scale=jnp.ones((layers, len(ROLES)), jnp.float32),
            length=jnp.asarray(length, jnp.int32),
        )

    def metas(self) -> jax.Array:
        """(layers, roles, STATS) zeros carrying this history's scales in the scale column."""
        metas = jnp.zeros((*self.scale.shape, len(STATS)), jnp.float32)
        return metas.at[..., SCALE].set(self.scale)

    def record(self, stats: jax.Array) -> AmaxHistory:
        """The history after a step whose measured (layers, roles, STATS) are ``stats``."""
        amax = jnp.roll(self.amax, 1, axis=-1).at[..., 0].set(stats[..., AMAX])
        window = jnp.arange(HISTORY_CAPACITY) < self.length
        peak = jnp.max(jnp.where(window, amax, 0), axis=-1)
        scale = scale_from_amax(peak, jnp.asarray(_ROLE_MAX), self.scale)
        return dataclasses.replace(self, amax=amax, scale=scale)
