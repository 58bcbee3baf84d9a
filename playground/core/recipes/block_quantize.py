"""Quantize-dequantize of a 2-D operand block by block, by a ``BlockRecipe``'s rule.

Rule, for an (R, C) array and a tile (tr, tc) (1 x b: blocks of b along the rows' last axis;
b x 1: blocks of b down the columns; b x b: square tiles of a weight)::

    padded   zeros appended so that tr divides R and tc divides C (the last block of a
             contraction of length K holds ``last_block_size(K, b)`` real values)
    amax     max |value| per tile (per tensor too, for a two-level recipe)
    scaled   value / (block_scale x tensor_scale)        (scales: ``core.recipes.block_formats``)
    element  round-to-nearest-even (or stochastic, given uniforms) of clip(scaled, +-max)
             into the element format
    value'   element x block_scale x tensor_scale         (``BlockQuantized.dequantized``)

A finite scaled magnitude beyond the format's overflow edge (max plus half the gap above it) is
counted as saturated: it is stored as +-max where an unbounded format would have kept more. An
inf or NaN entry stays inf or NaN (its block's other entries are quantized by whatever scale
its amax gives), so an overflow upstream is never turned into a number.

``random_hadamard`` rotates every 16 consecutive rows by the orthogonal H S (H: the normalized
Sylvester-Hadamard matrix, S: random signs from a key); rotating both inputs of a product that
contracts over the rows leaves it unchanged, and spreads an outlier over its 16 rows first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.recipes.block_formats import (
    BlockRecipe,
    e8m0_exponent,
    element_facts,
    float32_block_scale,
    nvfp4_tensor_scale,
)

Tile = tuple[int, int]


def last_block_size(length: int, block: int) -> int:
    """How many real values the last block of a dimension of ``length`` holds (the rest of it
    is zero padding); ``block`` when it divides ``length``."""
    if length < 1 or block < 1:
        raise ValueError(f"length and block must be at least 1; got {length} and {block}")
    return (length - 1) % block + 1


def pad_to_tiles(values: jax.Array, tile: Tile) -> jax.Array:
    """``values`` with zero rows and columns appended so that the tile divides its shape."""
    rows, cols = values.shape
    extra = (-rows % tile[0], -cols % tile[1])
    return jnp.pad(values, ((0, extra[0]), (0, extra[1]))) if any(extra) else values


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class BlockQuantized:
    """One operand quantized by the module rule.

    elements: (padded rows, padded cols) float32 holding element-format values.
    scales: (rows / tr, cols / tc) block scales, float32 (E8M0 and E4M3 scales are exact).
    scale_log2: log2 of scales (E8M0's exponent exactly, even where 2^e is no normal float32).
    tensor_scale: the float32 tensor scale (1 for a one-level recipe).
    saturated: (padded shape) bool, the entries clipped beyond the overflow edge.
    shape, tile: the unpadded shape and the tile (static).
    power_of_two: whether the block scales are powers of two (E8M0) (static).
    """

    elements: jax.Array
    scales: jax.Array
    scale_log2: jax.Array
    tensor_scale: jax.Array
    saturated: jax.Array
    shape: tuple[int, int] = field(metadata={"static": True})
    tile: Tile = field(metadata={"static": True})
    power_of_two: bool = field(metadata={"static": True})

    def dequantized(self) -> jax.Array:
        """element x block_scale x tensor_scale, float32, in the unpadded shape."""
        tiles = _tiled(self.elements, self.tile)
        if self.power_of_two:
            # Two normal factors 2^(e // 2) 2^(e - e // 2): E8M0's 2^-127 is a float32
            # subnormal, which XLA on CPU flushes to zero.
            exponent = self.scale_log2.astype(jnp.int32)[:, None, :, None]
            half = exponent // 2
            values = tiles * power_of_two(half) * power_of_two(exponent - half)
        else:
            values = tiles * self.scales[:, None, :, None] * self.tensor_scale
        values = values.reshape(self.elements.shape)
        return values[: self.shape[0], : self.shape[1]]


def power_of_two(exponent: jax.Array) -> jax.Array:
    """2^e, float32, built from its bits for integers e in [-126, 127] (normal numbers): exact,
    and much cheaper than ``jnp.ldexp`` over a whole tensor."""
    biased = (exponent.astype(jnp.int32) + 127) << 23
    return jax.lax.bitcast_convert_type(biased, jnp.float32)


def nvfp4_block_scale(amax: jax.Array, tensor_scale: jax.Array, fmt: str, scale_fmt: str):
    """E4M3(min(amax / tensor_scale / element max, scale max)), as float32: rounded by
    ``round_to_nearest`` (the cast's values; XLA's own cast to E4M3 cost a third of an NVFP4
    quantization on CPU)."""
    block = amax / tensor_scale / jnp.float32(element_facts(fmt).max)
    return round_to_nearest(jnp.clip(block, 0, element_facts(scale_fmt).max), scale_fmt)


def _tiled(values: jax.Array, tile: Tile) -> jax.Array:
    """(R, C) -> (R / tr, tr, C / tc, tc): the tiles' entries on axes 1 and 3."""
    rows, cols = values.shape
    return values.reshape(rows // tile[0], tile[0], cols // tile[1], tile[1])


def quantize(
    values: jax.Array,
    tile: Tile,
    recipe: BlockRecipe,
    uniform: jax.Array | None = None,
) -> BlockQuantized:
    """``values`` (2-D) quantized tile by tile by ``recipe``'s rule; ``uniform`` (values'
    shape, in [0, 1)) rounds stochastically instead of to nearest."""
    padded, scaled, scales, scale_log2, tensor_scale = _scaled(values, tile, recipe)
    facts = element_facts(recipe.element_format)
    finite = jnp.isfinite(padded)
    saturated = finite & (jnp.abs(scaled) > facts.overflow_edge)
    clipped = jnp.clip(scaled, -facts.max, facts.max)
    if uniform is None:
        elements = round_to_nearest(clipped, recipe.element_format)
    else:
        elements = stochastic_round(clipped, recipe.element_format, pad_to_tiles(uniform, tile))
    # An inf or NaN stays one (never clipped into a number), so an overflow upstream shows.
    elements = jnp.where(finite, elements, padded)
    return BlockQuantized(
        elements,
        scales,
        scale_log2,
        tensor_scale,
        saturated,
        values.shape,
        tile,
        recipe.power_of_two_scales,
    )


def units(values: jax.Array, tile: Tile, recipe: BlockRecipe) -> jax.Array:
    """|scaled| of the rule for each entry of ``values`` (2-D), in its shape: the float32
    number ``quantize`` rounds into the element format before clipping, so the element
    format's own ranges apply to it (0 in a block whose scale flushed to zero; NaN where the
    value is inf or NaN)."""
    padded, scaled, *_ = _scaled(values, tile, recipe)
    kept = jnp.where(jnp.isfinite(padded), jnp.abs(scaled), jnp.nan)
    return kept[: values.shape[0], : values.shape[1]]


def _scaled(values: jax.Array, tile: Tile, recipe: BlockRecipe) -> tuple[jax.Array, ...]:
    """(padded, scaled, scales, scale_log2, tensor_scale) of the rule, float32."""
    values = values.astype(jnp.float32)
    padded = pad_to_tiles(values, tile)
    tiles = _tiled(padded, tile)
    amax = jnp.max(jnp.abs(tiles), axis=(1, 3))
    fmt = recipe.element_format
    tensor_scale = jnp.float32(1)
    if recipe.power_of_two_scales:
        exponent = e8m0_exponent(amax, fmt, recipe.scale_rule)
        scale_log2 = exponent.astype(jnp.float32)
        scales = jnp.ldexp(jnp.float32(1), exponent)
        # 2^-e is normal: e <= 119 for any finite float32 amax.
        scaled = tiles * power_of_two(jnp.maximum(-exponent, -126))[:, None, :, None]
    else:
        if recipe.two_level:
            tensor_scale = nvfp4_tensor_scale(jnp.max(amax), fmt, recipe.scale_format)
            scales = nvfp4_block_scale(amax, tensor_scale, fmt, recipe.scale_format)
            tiles = tiles / tensor_scale
        else:
            scales = float32_block_scale(amax, fmt)
        spread = scales[:, None, :, None]
        # A block scale flushed to zero (a two-level block far below the tensor's amax)
        # stores its entries as 0, where a division would give NaN.
        scaled = jnp.where(spread > 0, tiles / jnp.where(spread > 0, spread, 1), 0)
        scale_log2 = jnp.log2(scales)
    scaled = scaled.reshape(tiles.shape[0] * tile[0], tiles.shape[2] * tile[1])
    return padded, scaled, scales, scale_log2, tensor_scale


def _gap_exponent(magnitude: jax.Array, fmt: str) -> jax.Array:
    """log2 of the gap between ``fmt``'s neighbours around each magnitude (float32, at most
    the format's max): 2^(floor(log2 m) - mantissa_bits), at least the smallest subnormal.
    floor(log2 m) is read from the float32 exponent bits (-127 for 0 and subnormals)."""
    facts = element_facts(fmt)
    binade = ((jax.lax.bitcast_convert_type(magnitude, jnp.int32) >> 23) & 0xFF) - 127
    return jnp.maximum(binade - facts.mantissa_bits, facts.subnormal_exponent)


def round_to_nearest(values: jax.Array, fmt: str) -> jax.Array:
    """Each entry of ``values`` (within +-max of ``fmt``) rounded to the nearest value of
    ``fmt``, ties to even: round(v / gap) x gap with the gap a power of two, so the quotient is
    exact. The same values as the cast to ``fmt`` (the tests check it against ml_dtypes),
    several times cheaper than XLA's conversion on CPU."""
    exponent = _gap_exponent(jnp.abs(values), fmt)
    return jnp.round(values * power_of_two(-exponent)) * power_of_two(exponent)


def stochastic_round(values: jax.Array, fmt: str, uniform: jax.Array) -> jax.Array:
    """Each entry of ``values`` (within +-max of ``fmt``) rounded to one of its two neighbours
    in ``fmt``: up with probability (|v| - lower) / gap (the gap as in ``round_to_nearest``),
    so its expectation is v."""
    magnitude = jnp.abs(values)
    exponent = _gap_exponent(magnitude, fmt)
    in_gaps = magnitude * power_of_two(-exponent)  # exact: a power-of-two factor
    lower = jnp.floor(in_gaps)
    rounded = jnp.where(uniform < in_gaps - lower, lower + 1, lower)
    return jnp.sign(values) * rounded * power_of_two(exponent)


def hadamard_matrix(size: int) -> np.ndarray:
    """The Sylvester-Hadamard matrix of ``size`` (a power of two) over sqrt(size): orthogonal."""
    if size < 1 or size & (size - 1):
        raise ValueError(f"hadamard size must be a power of two; got {size}")
    matrix = np.ones((1, 1))
    while matrix.shape[0] < size:
        matrix = np.block([[matrix, matrix], [matrix, -matrix]])
    return (matrix / math.sqrt(size)).astype(np.float32)


def random_hadamard(values: jax.Array, block: int, key: jax.Array) -> jax.Array:
    """``values`` (R, C) zero-padded to a multiple of ``block`` rows, each run of ``block``
    rows v replaced by (H S)^T v, S = diag(random signs from ``key``). A product contracting
    over the rows of two arrays rotated with the same key is unchanged."""
    signs = jax.random.rademacher(key, (block,), jnp.float32)
    rotation = jnp.asarray(hadamard_matrix(block)) * signs[None, :]
    padded = pad_to_tiles(values.astype(jnp.float32), (block, 1))
    runs = padded.reshape(-1, block, padded.shape[1])
    rotated = jnp.einsum("ji,bjc->bic", rotation, runs, precision=jax.lax.Precision.HIGHEST)
    return rotated.reshape(padded.shape)
