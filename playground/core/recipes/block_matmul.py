"""The block-scaled matmul of a ``BlockRecipe``: emulated in float32, with a custom VJP.

Rule, for ``out = lhs @ rhs`` (lhs: the (N, K) input, rhs: the (K, M) kernel; b: the recipe's
block; Q(t, tile): ``core.recipes.block_quantize.quantize`` dequantized; TransformerEngine's rule:
every quantized copy is made from the float32 tensor, in the direction its matmul contracts)::

    forward   out    = Q(lhs, 1 x b) @ Q(rhs, W)          W = the weight tile, or b x 1
    backward  g      = d_out, the gradient arriving at out
              d_lhs  = Q(g, 1 x b; sr) @ Q(rhs, W')^T      W' = the weight tile, or 1 x b
              d_rhs  = Q(R lhs, b x 1)^T @ Q(R g, b x 1; sr)
                       R = the random Hadamard rotation when the recipe has one and ``hadamard``
                       is on (identity otherwise); sr = stochastic rounding when the recipe
                       rounds gradients stochastically

Every product accumulates in float32 at "highest" precision (or as an emulated ``accumulation``
says, ``core.formats.accumulation``, forward and backward). Emulation rounds each dequantized
operand to float32 before the product, where a block-scaled tensor core multiplies the elements
first and applies the scales to the block's partial sum: the two differ by float32 rounding.
Gradients are in the recipe's element format (E4M3 for MXFP8 and FP8 blocks, as
TransformerEngine 2.x's MXFP8BlockScaling and Float8BlockScaling default to ``Format.E4M3``;
E2M1 for NVFP4). The randomness (Hadamard signs, stochastic rounding's uniforms,
``gradient_uniforms``) comes from ``gradient_key(key, g)``: ``key`` (the step gives each layer
its index) folded with a digest of the arriving gradient, so each training step, whose gradient
differs from the last, draws afresh without a step counter threaded through the step, and the
same key and gradient give the same numbers on a backend.

Statistics leave through ``meta`` as in ``core.recipes.float8``: its gradient is one STATS row per
role (input: Q(lhs, 1 x b); kernel: Q(rhs, W); gradient: Q(g, 1 x b)), where ``scale`` is the
per-tensor factor values are multiplied by before the block scales (1 / tensor_scale; 1 for a
one-level recipe).

Where ``jax.nn.scaled_dot_general`` runs natively (a Blackwell GPU), ``native=True`` computes
the forward product with it, by JAX's block rules for the recipe's ``jax_mode``; the backward
stays emulated. ``matmul_path`` says which ran.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from playground.core.formats.accumulation import Accumulation, matmul
from playground.core.recipes.block_formats import BlockRecipe
from playground.core.recipes.block_quantize import BlockQuantized, quantize, random_hadamard
from playground.core.recipes.float8 import ROLES, STATS

HIGHEST = jax.lax.Precision.HIGHEST
# Keys folded from the matmul's key: the Hadamard signs, the stochastic roundings' draws.
SIGNS, ROUNDING = 1, 2


def _product(a: jax.Array, b: jax.Array, accumulation: Accumulation | None = None) -> jax.Array:
    if accumulation is None:
        return jnp.dot(a, b, precision=HIGHEST, preferred_element_type=jnp.float32)
    return matmul(a, b, accumulation)


def tensor_stats(values: jax.Array, quantized: BlockQuantized) -> jax.Array:
    """The STATS row of one quantized operand: amax, the per-tensor factor, entries saturated,
    nonzero entries flushed to zero, entries (padding excluded)."""
    rows, cols = quantized.shape
    elements = quantized.elements[:rows, :cols]
    flushed = (values != 0) & jnp.isfinite(values) & (elements == 0)
    row = (
        jnp.max(jnp.abs(values)),
        1 / quantized.tensor_scale,
        jnp.sum(quantized.saturated[:rows, :cols]),
        jnp.sum(flushed),
        values.size,
    )
    return jnp.stack([jnp.asarray(s, jnp.float32) for s in row])


def weight_tile(recipe: BlockRecipe, forward: bool) -> tuple[int, int]:
    """The kernel's tile: the recipe's 2-D tile, or 1-D blocks along the contracted axis (K
    forward, M for the input gradient)."""
    if recipe.weight_tile is not None:
        return recipe.weight_tile
    return (recipe.block, 1) if forward else (1, recipe.block)


def _mix(words: jax.Array) -> jax.Array:
    """murmur3's 32-bit finalizer: every input bit flips each output bit with probability ~1/2."""
    words = words ^ (words >> 16)
    words = words * jnp.uint32(0x85EBCA6B)
    words = words ^ (words >> 13)
    words = words * jnp.uint32(0xC2B2AE35)
    return words ^ (words >> 16)


def gradient_uniforms(key: jax.Array, shape: tuple[int, int]) -> tuple[jax.Array, jax.Array]:
    """Two independent arrays of ``shape`` of uniforms in [0, 1), 16 bits each, for the
    gradient's two stochastic roundings (rows, columns): the halves of one 32-bit word per
    entry, a counter-based hash of the entry's index keyed by two words drawn from ``key``
    (mix(mix(index x golden ratio + k0) ^ k1)). Not cryptographic, but uniform and uncorrelated
    enough for rounding decisions, and on CPU much cheaper than drawing them with XLA's
    RngBitGenerator or threefry."""
    k0, k1 = jax.random.bits(jax.random.fold_in(key, ROUNDING), (2,), jnp.uint32)
    rows = jax.lax.broadcasted_iota(jnp.uint32, shape, 0)
    index = rows * jnp.uint32(shape[1]) + jax.lax.broadcasted_iota(jnp.uint32, shape, 1)
    words = _mix(_mix(index * jnp.uint32(0x9E3779B9) + k0) ^ k1)
    step = jnp.float32(2**-16)
    return (words >> 16).astype(jnp.float32) * step, (words & 0xFFFF).astype(jnp.float32) * step


def gradient_key(key: jax.Array, gradient: jax.Array) -> jax.Array:
    """The key of one backward pass's draws: ``key`` folded with the wrapping uint32 sum of the
    gradient's float32 bits (exact in any order of summation, so the same on every run)."""
    bits = jax.lax.bitcast_convert_type(gradient.astype(jnp.float32), jnp.uint32)
    return jax.random.fold_in(key, jnp.sum(bits, dtype=jnp.uint32))


def _native_forward(lhs, rhs, a, w, recipe):
    """The forward product by ``jax.nn.scaled_dot_general`` (its own quantizer and rules)."""
    scales = (a.tensor_scale, w.tensor_scale) if recipe.two_level else (None, None)
    configs = [
        jax.nn.get_scaled_dot_general_config(recipe.jax_mode, global_scale=scale)
        for scale in (*scales, scales[0])
    ]
    numbers = (((1,), (0,)), ((), ()))
    return jax.nn.scaled_dot_general(lhs, rhs, numbers, jnp.float32, configs=configs)


def _forward(lhs, rhs, meta, key, recipe, hadamard, native, accumulation=None):
    del meta, hadamard  # meta only carries the statistics out, through its gradient
    lhs, rhs = lhs.astype(jnp.float32), rhs.astype(jnp.float32)
    a = quantize(lhs, (1, recipe.block), recipe)
    w = quantize(rhs, weight_tile(recipe, forward=True), recipe)
    if native:
        out = _native_forward(lhs, rhs, a, w, recipe)
    else:
        out = _product(a.dequantized(), w.dequantized(), accumulation)
    stats = (tensor_stats(lhs, a), tensor_stats(rhs, w))
    return out, (lhs, rhs, w, stats, key)


def _backward(recipe, hadamard, native, accumulation, residuals, d_out):
    del native
    lhs, rhs, w, (input_stats, kernel_stats), key = residuals
    d_out = d_out.astype(jnp.float32)
    key = gradient_key(key, d_out)
    rows_tile, columns_tile = (1, recipe.block), (recipe.block, 1)
    x_in, g_in = lhs, d_out
    if hadamard and recipe.hadamard_block:
        signs = jax.random.fold_in(key, SIGNS)
        x_in = random_hadamard(lhs, recipe.hadamard_block, signs)
        g_in = random_hadamard(d_out, recipe.hadamard_block, signs)
    rows_uniform = columns_uniform = None
    if recipe.stochastic_gradients:  # g_in has at least d_out's rows (padded when rotated)
        rows_uniform, columns_uniform = gradient_uniforms(key, g_in.shape)
        rows_uniform = rows_uniform[: d_out.shape[0]]
    g_rows = quantize(d_out, rows_tile, recipe, rows_uniform)
    # A 2-D tile serves both directions; 1-D blocks are quantized again along M.
    w_back = w if recipe.weight_tile else quantize(rhs, weight_tile(recipe, False), recipe)
    d_lhs = _product(g_rows.dequantized(), w_back.dequantized().T, accumulation)
    x_columns = quantize(x_in, columns_tile, recipe)
    g_columns = quantize(g_in, columns_tile, recipe, columns_uniform)
    d_rhs = _product(x_columns.dequantized().T, g_columns.dequantized(), accumulation)
    stats = jnp.stack([input_stats, kernel_stats, tensor_stats(d_out, g_rows)])
    return d_lhs, d_rhs, stats, None


@functools.partial(jax.custom_vjp, nondiff_argnums=(4, 5, 6, 7))
def block_matmul(
    lhs: jax.Array,
    rhs: jax.Array,
    meta: jax.Array,
    key: jax.Array,
    recipe: BlockRecipe,
    hadamard: bool = True,
    native: bool = False,
    accumulation: Accumulation | None = None,
) -> jax.Array:
    """(N, K) @ (K, M) by the module rule, in float32 (each emulated product accumulated by
    ``accumulation`` when given); ``meta``'s gradient is the (roles, STATS) statistics of
    (input, kernel, gradient); ``key`` a JAX PRNG key."""
    return _forward(lhs, rhs, meta, key, recipe, hadamard, native, accumulation)[0]


block_matmul.defvjp(_forward, _backward)


def block_dot_general(
    lhs,
    rhs,
    dimension_numbers,
    precision=None,
    preferred_element_type=None,
    out_sharding=None,
    *,
    meta: jax.Array,
    scaling: str | None = None,
    recipe: BlockRecipe,
    hadamard: bool = True,
    key: jax.Array | int = 0,
    native: bool | None = None,
    accumulation: Accumulation | None = None,
):
    """``nnx.Linear``'s dot_general for a block recipe (the 2-D batch times kernel contraction
    only). ``key``: a PRNG key, or an int seed for one; ``scaling`` must be None (a block
    recipe takes no per-tensor scaling); ``native``: None asks ``use_native`` (what
    ``matmul_path`` reports); ``accumulation``: an emulated accumulation of every product
    (``core.formats.accumulation``; None: float32)."""
    del precision, preferred_element_type, out_sharding  # float32 or ``accumulation``
    if scaling is not None:
        raise ValueError(f"the {recipe.name} recipe takes no fp8_scaling; got {scaling!r}")
    if lhs.ndim != 2 or tuple(map(tuple, dimension_numbers[0])) != ((1,), (0,)):
        raise ValueError(f"the {recipe.name} matmul takes a 2-D batch times a kernel")
    if isinstance(key, int):
        key = jax.random.key(key)
    native = use_native(recipe) if native is None else native
    native = native and accumulation is None  # an emulated accumulation emulates the product
    return block_matmul(lhs, rhs, meta, key, recipe, hadamard, native, accumulation)


def empty_meta() -> jax.Array:
    """A (roles, STATS) meta of zeros: one matmul's statistics slot."""
    return jnp.zeros((len(ROLES), len(STATS)), jnp.float32)


@functools.cache
def native_scaled_dot_general(mode: str) -> bool:
    """Whether ``jax.nn.scaled_dot_general`` in ``mode`` compiles on this backend: a GPU of
    compute capability 10 or more (Blackwell) with cuDNN's block-scaled matmul. On CPU it has
    no lowering, so False (the matmuls are emulated)."""
    device = jax.devices()[0]
    capability = getattr(device, "compute_capability", None)
    if device.platform != "gpu" or capability is None or float(capability) < 10:
        return False
    try:
        config = jax.nn.get_scaled_dot_general_config(mode)
        numbers = (((1,), (0,)), ((), ()))
        probe = jax.jit(lambda a, b: jax.nn.scaled_dot_general(a, b, numbers, configs=[config] * 3))
        probe.lower(jnp.ones((128, 128)), jnp.ones((128, 128))).compile()
    except Exception:  # noqa: BLE001 (any failure to compile means: emulate)
        return False
    return True


def use_native(recipe: BlockRecipe) -> bool:
    """Whether ``recipe``'s forward matmul runs natively here (it has a JAX mode that does)."""
    return recipe.jax_mode is not None and native_scaled_dot_general(recipe.jax_mode)


def matmul_path(recipe: BlockRecipe) -> str:
    """Which path ``recipe``'s matmuls take on this backend, as the page says it."""
    backend = jax.default_backend()
    if use_native(recipe):
        return (
            f"native forward: jax.nn.scaled_dot_general ({recipe.jax_mode}) on {backend}; "
            "backward emulated in float32"
        )
    return (
        f"emulated: operands quantized block by block, dequantized and multiplied in float32 "
        f"on {backend} (jax.nn.scaled_dot_general does not run natively here)"
    )
