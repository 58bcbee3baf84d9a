"""What each training recipe does to one stored tensor, as TransformerEngine's debug
statistics (``LogFp8TensorStats``) count it.

Rule, for a tensor x as its matmul sees it (``sampling.matmul_view``: rows x columns), its
non-finite entries (NaN, +inf, -inf) counted by name, set to 0 and left out of every share,
and ``finite`` its other entries::

    q          x stored by the recipe and read back (element x scale), round to nearest
    underflow  #{x != 0 and q == 0} / finite          (TE: underflows%, as a fraction)
    overflow   #{x / scale past the element format's largest value} / finite: saturated
               (clipped to +-max, as TE's saturating casts store it; a plain cast would give
               inf or NaN)
    rel_error  ||q - x|| / ||x||                       (None when ||x|| = 0)
    mse        sum (q - x)^2 / finite                  (TE: mse)
    scale_min, scale_max  the smallest and largest dequantization factor (TE's scale_inv)
               over the blocks holding a nonzero entry; 1.0 for a plain cast

Recipes (RECIPES; a tensor is a gradient when its name contains "grad", else a weight, as
every tensor of a checkpoint is)::

    bfloat16, float16  plain casts (scale 1)
    float8_current     one scale per tensor, s = fmax / amax in float32 (TE's current scaling,
                       ``core.recipes.float8.scale_from_amax``): E4M3 (fmax 448), E5M2 (57344)
                       for a gradient; q = saturating_cast(x s) / s
    mxfp8              blocks of 32 along the rows AND down the columns (TE quantizes both
                       orientations), scale 2^ceil(log2(amax / 448)) (E8M0,
                       ``core.recipes.block_formats.e8m0_exponent``); each statistic is the
                       worse orientation's, the scales' range spans both
    fp8_block          E4M3, scale amax / 448 in float32 per 128 x 128 tile of a weight, per
                       1 x 128 block of a gradient (rowwise and columnwise, the worse)
    nvfp4              E2M1 elements, E4M3 block scales of 16 x 16 tiles of a weight (1 x 16 of
                       a gradient, both orientations, the worse) under a float32 tensor scale
                       amax / (448 x 6) (``nvfp4_tensor_scale``, ``nvfp4_block_scale``); the
                       forward cast: round to nearest, no stochastic rounding, no Hadamard

How: a tensor stored in 16 bits or fewer has at most 65536 distinct values, so the per-tensor
recipes and MXFP8 (whose scales are powers of two) are evaluated exactly in float64 on a
histogram of (block exponent, stored bit pattern) cells: one ``np.bincount`` per orientation,
then every occupied cell once, with numpy and ml_dtypes' exact casts. float32 and float64
tensors take the same evaluation on every entry. fp8_block and NVFP4 (scales that are not
powers of two) run as one fused XLA program, built from the recipes' own JAX pieces
(``round_to_nearest``, the scale rules), on the tensor laid out as 128 x 128 super-tiles (each
holds whole blocks of every layout), at most CHUNK_TILES of them a call, so three compiled
programs per kind of tensor serve every shape; their errors are scaled by a power of two near
1 / amax (exact), squared and summed in float32 per super-tile, and then in float64. XLA on CPU
reads a float32 subnormal input (|x| < 2^-126) as 0 there.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.formats.dtypes import saturating_cast
from playground.core.recipes.block_formats import (
    e8m0_exponent,
    element_facts,
    float32_block_scale,
    nvfp4_tensor_scale,
)
from playground.core.recipes.block_quantize import nvfp4_block_scale, round_to_nearest
from playground.core.recipes.float8 import scale_from_amax
from playground.core.tensors.formats import past_the_edge

RECIPES = ("bfloat16", "float16", "float8_current", "mxfp8", "fp8_block", "nvfp4")
# What each recipe stores, in a few words (the module rule's table).
STORES = {
    "bfloat16": "a plain cast",
    "float16": "a plain cast",
    "float8_current": "E4M3 with one scale per tensor, amax to 448 (E5M2 for a gradient)",
    "mxfp8": "E4M3 with a power-of-two scale per 32 values, rowwise and columnwise",
    "fp8_block": "E4M3 with a float32 scale per 128 x 128 tile (1 x 128 for a gradient)",
    "nvfp4": "E2M1 with an E4M3 scale per 16 x 16 tile (1 x 16 for a gradient) and a tensor scale",
}
STATISTICS = ("underflow", "overflow", "rel_error", "mse", "scale_min", "scale_max")
QUANTIZED = RECIPES[2:]
GRADIENT_MARK = "grad"
E4M3, E5M2, E2M1 = "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"
MX_BLOCK, FP8_BLOCK, NVFP4_BLOCK = 32, 128, 16
TILE = 128  # a super-tile: the largest block of any recipe (fp8_block's 128 x 128)
CHUNK_TILES = 64  # super-tiles per compiled call: 1 M values
CHUNK_LENGTHS = (1, 8, CHUNK_TILES)  # a small tensor's call is as short as it can be
FP8_BLOCK_TILES = {"weight": ((128, 128),), "gradient": ((1, 128), (128, 1))}
NVFP4_TILES = {"weight": ((16, 16),), "gradient": ((1, 16), (16, 1))}


def is_gradient(name: str) -> bool:
    """Whether a tensor is read as a gradient (its name contains "grad"), else a weight."""
    return GRADIENT_MARK in name.lower()


@dataclass(frozen=True)
class RecipeStats:
    """One recipe's statistics of one tensor (see the module rule); None where undefined."""

    underflow: float | None
    overflow: float | None
    rel_error: float | None
    mse: float | None
    scale_min: float | None
    scale_max: float | None


@dataclass(frozen=True)
class TensorStats:
    """A tensor's non-finite entries by kind, its finite entries and each recipe's stats."""

    nonfinite: dict[str, int]
    finite: int
    recipes: dict[str, RecipeStats]


@dataclass
class _Tally:
    """Counts and sums of one recipe (one orientation) over a tensor."""

    underflow: int = 0
    overflow: int = 0
    error_sq: float = 0.0
    scale_min: float = math.inf
    scale_max: float = -math.inf

    def worse(self, other: _Tally) -> _Tally:
        """Each statistic the worse of the two; the scales' range spans both."""
        return _Tally(
            max(self.underflow, other.underflow),
            max(self.overflow, other.overflow),
            max(self.error_sq, other.error_sq),
            min(self.scale_min, other.scale_min),
            max(self.scale_max, other.scale_max),
        )

    def stats(self, finite: int, norm_sq: float) -> RecipeStats:
        if finite == 0:
            return RecipeStats(None, None, None, None, None, None)
        live = self.scale_min <= self.scale_max
        return RecipeStats(
            underflow=self.underflow / finite,
            overflow=self.overflow / finite,
            rel_error=math.sqrt(self.error_sq / norm_sq) if norm_sq > 0 else None,
            mse=self.error_sq / finite,
            scale_min=self.scale_min if live else None,
            scale_max=self.scale_max if live else None,
        )


def _cast_tally(exact, counts, multiplier, fmt: str) -> tuple[int, int, float]:
    """(underflow, overflow, sum of squared errors) of q = saturating_cast(x m) / m over the
    entries ``exact`` (float64), each counted ``counts`` times (None: once); x m in float32."""
    scaled = exact.astype(np.float32) * np.asarray(multiplier, np.float32)
    element = saturating_cast(scaled, fmt, np).astype(np.float64)
    stored = element / np.asarray(multiplier, np.float32).astype(np.float64)
    lost = (exact != 0) & (element == 0)
    beyond = past_the_edge(np.abs(scaled.astype(np.float64)), fmt)
    error_sq = np.square(stored - exact)
    if counts is None:
        return int(np.count_nonzero(lost)), int(np.count_nonzero(beyond)), float(error_sq.sum())
    shape = np.broadcast_shapes(exact.shape, np.shape(multiplier))
    weights = np.broadcast_to(counts, shape)
    return (
        int(weights[np.broadcast_to(lost, shape)].sum()),
        int(weights[np.broadcast_to(beyond, shape)].sum()),
        float(np.sum(weights * np.broadcast_to(error_sq, shape))),
    )


@functools.cache
def _code_values(dtype: np.dtype) -> np.ndarray:
    """Every bit pattern of a dtype of at most 16 bits, as float64 (NaN where it is one)."""
    bits = np.arange(1 << (8 * dtype.itemsize), dtype=f"u{dtype.itemsize}")
    with np.errstate(invalid="ignore"):  # NaN patterns stay NaN
        return bits.view(dtype).astype(np.float64)


def _exponents(amax: np.ndarray) -> np.ndarray:
    """MXFP8's E8M0 exponent of each block amax (``e8m0_exponent``, rule "round_up")."""
    return e8m0_exponent(np.asarray(amax, np.float32), E4M3, "round_up", np).astype(np.int64)


def _pad(values: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """``values`` (2-D) zero-padded at the end to multiples of ``rows`` and ``columns``."""
    extra = (-values.shape[0] % rows, -values.shape[1] % columns)
    return np.pad(values, ((0, extra[0]), (0, extra[1]))) if any(extra) else values


def _mx_blocks(values: np.ndarray, axis: int) -> np.ndarray:
    """``values`` zero-padded to whole MXFP8 blocks of 32 along ``axis`` (1: rows, 0: columns)
    and viewed as blocks: (rows, blocks, 32) for rows, (blocks, 32, columns) for columns."""
    if axis == 1:
        padded = _pad(values, 1, MX_BLOCK)
        return padded.reshape(padded.shape[0], -1, MX_BLOCK)
    padded = _pad(values, MX_BLOCK, 1)
    return padded.reshape(-1, MX_BLOCK, padded.shape[1])


def _power_range(exponents: np.ndarray) -> tuple[float, float]:
    """The smallest and largest power-of-two scale, 2^e, of the blocks' ``exponents``."""
    return 2.0 ** int(exponents.min()), 2.0 ** int(exponents.max())


def _mx_cells(codes: np.ndarray, values: np.ndarray, axis: int) -> _Tally:
    """MXFP8 of a 16-bit-or-narrower tensor given as bit patterns ``codes`` (2-D, finite),
    blocks of 32 along ``axis`` (1: rows, 0: columns), by the (exponent, pattern) histogram."""
    width = 8 * codes.dtype.itemsize
    magnitude_mask = (1 << (width - 1)) - 1
    blocked = _mx_blocks(codes, axis)
    amax_codes = np.max(blocked & magnitude_mask, axis=2 if axis == 1 else 1, keepdims=True)
    exponent = _exponents(np.abs(values[amax_codes]))
    live = amax_codes != 0
    if not live.any():
        return _Tally()
    low = int(exponent[live].min())
    cell = (np.where(live, exponent - low, 0).astype(np.int32) << width) + blocked
    histogram = np.bincount(cell.ravel(), minlength=(int(exponent[live].max()) - low + 1) << width)
    occupied = np.flatnonzero(histogram)
    cell_exponent, cell_code = (occupied >> width) + low, occupied & ((1 << width) - 1)
    multiplier = np.exp2(-cell_exponent.astype(np.float64)).astype(np.float32)
    cast = _cast_tally(values[cell_code], histogram[occupied], multiplier, E4M3)
    return _Tally(*cast, *_power_range(exponent[live]))


def _mx_direct(exact: np.ndarray, axis: int) -> _Tally:
    """MXFP8 of a float64 copy of a wide (float32/float64) tensor, every entry evaluated."""
    blocked = _mx_blocks(exact, axis)
    amax = np.max(np.abs(blocked), axis=2 if axis == 1 else 1, keepdims=True)
    live = amax > 0
    if not live.any():
        return _Tally()
    exponent = _exponents(amax)
    multiplier = np.exp2(-exponent.astype(np.float64)).astype(np.float32)
    return _Tally(*_cast_tally(blocked, None, multiplier, E4M3), *_power_range(exponent[live]))


def _block_recipe(x, tile, fmt, scales):
    """(underflow, overflow, per-tile squared errors over unit^2, scale min, scale max) of one
    block recipe on ``x`` (float32 super-tiles, (T, TILE, TILE)); ``scales(amax)`` gives
    (divisors applied in turn, dequantization factor per block)."""
    count = x.shape[0]
    tiles = x.reshape(count, TILE // tile[0], tile[0], TILE // tile[1], tile[1])
    amax = jnp.max(jnp.abs(tiles), axis=(2, 4), keepdims=True)
    first, second, factor = scales(amax)
    inner = tiles / first
    scaled = jnp.where(second > 0, inner / jnp.where(second > 0, second, 1), 0)
    facts = element_facts(fmt)
    element = round_to_nearest(jnp.clip(scaled, -facts.max, facts.max), fmt)
    stored = element * second * first
    lost = jnp.sum((tiles != 0) & (element == 0), dtype=jnp.int32)
    saturated = jnp.sum(jnp.abs(scaled) > facts.overflow_edge, dtype=jnp.int32)
    live = amax > 0
    smin = jnp.min(jnp.where(live, factor, jnp.inf))
    smax = jnp.max(jnp.where(live, factor, -jnp.inf))
    return lost, saturated, stored - tiles, smin, smax


@functools.cache
def _block_program(kind: str):
    """The fused fp8_block and NVFP4 statistics of a chunk of super-tiles (T, TILE, TILE) for
    ``kind`` of tensor, compiled once per chunk length T and dtype: for each recipe and
    orientation, (underflow, overflow, per-super-tile squared errors times unit^2, scale min,
    scale max)."""

    def run(chunk, tensor_scale, unit):
        x = chunk.astype(jnp.float32)
        results = []
        for tile in FP8_BLOCK_TILES[kind]:

            def fp8(amax):
                scale = float32_block_scale(amax, E4M3)
                return jnp.float32(1), scale, scale

            results.append(_block_recipe(x, tile, E4M3, fp8))
        for tile in NVFP4_TILES[kind]:

            def nvfp4(amax):
                block = nvfp4_block_scale(amax, tensor_scale, E2M1, E4M3)
                return tensor_scale, block, block * tensor_scale

            results.append(_block_recipe(x, tile, E2M1, nvfp4))
        return [
            (lost, saturated, jnp.sum(jnp.square(error * unit), axis=(1, 2, 3, 4)), smin, smax)
            for lost, saturated, error, smin, smax in results
        ]

    return jax.jit(run)


def _super_tiles(clean: np.ndarray) -> np.ndarray:
    """``clean`` (2-D) zero-padded to whole TILE x TILE super-tiles and laid out as a stack of
    them, (T, TILE, TILE): every block of every recipe (128 x 128 and 16 x 16 tiles, 1 x 128,
    128 x 1, 1 x 16 and 16 x 1 blocks) lies inside one super-tile."""
    padded = _pad(clean, TILE, TILE)
    rows, cols = padded.shape
    tiles = padded.reshape(rows // TILE, TILE, cols // TILE, TILE).swapaxes(1, 2)
    return np.ascontiguousarray(tiles).reshape(-1, TILE, TILE)


def _dispatch_blocks(clean: np.ndarray, kind: str, amax: float):
    """Start fp8_block and NVFP4 on a finite tensor (2-D, stored dtype), a chunk of super-tiles
    at a time (the shortest of CHUNK_LENGTHS that holds it, else CHUNK_TILES: three compiled
    lengths whatever the shapes); XLA runs them while the host goes on (``_collect_blocks``
    waits for them)."""
    tiles = _super_tiles(clean)
    length = next(size for size in CHUNK_LENGTHS if size >= tiles.shape[0] or size == CHUNK_TILES)
    tensor_scale = np.float32(nvfp4_tensor_scale(jnp.float32(amax), E2M1, E4M3))
    unit_exponent = -math.frexp(amax)[1] if amax > 0 else 0
    unit = np.float32(math.ldexp(1.0, max(-126, min(127, unit_exponent))))
    program = _block_program(kind)
    pending = []
    for start in range(0, tiles.shape[0], length):
        part = tiles[start : start + length]
        if part.shape[0] < length:
            part = np.concatenate(
                [part, np.zeros((length - part.shape[0], TILE, TILE), part.dtype)]
            )
        pending.append(program(part, tensor_scale, unit))
    return kind, pending, float(unit)


def _collect_blocks(kind: str, pending: list, unit: float) -> dict[str, _Tally]:
    """The tallies of ``_dispatch_blocks``' chunks; each recipe the worse orientation."""
    names = ["fp8_block"] * len(FP8_BLOCK_TILES[kind]) + ["nvfp4"] * len(NVFP4_TILES[kind])
    tallies = [_Tally() for _ in names]
    for results in pending:
        for tally, (lost, saturated, error_sq, smin, smax) in zip(tallies, results, strict=True):
            tally.underflow += int(lost)
            tally.overflow += int(saturated)
            tally.error_sq += float(np.sum(np.asarray(error_sq, np.float64))) / unit**2
            tally.scale_min = min(tally.scale_min, float(smin))
            tally.scale_max = max(tally.scale_max, float(smax))
    combined: dict[str, _Tally] = {}
    for name, tally in zip(names, tallies, strict=True):
        combined[name] = combined[name].worse(tally) if name in combined else tally
    return combined


def tensor_stats(matrix: np.ndarray, gradient: bool = False) -> TensorStats:
    """Every recipe's statistics of ``matrix`` (2-D, its stored float dtype; see the module
    rule); ``gradient`` picks E5M2 for float8_current and 1-D blocks for the block recipes."""
    matrix = np.ascontiguousarray(matrix)
    narrow = matrix.dtype.itemsize <= 2
    if narrow:
        values = _code_values(matrix.dtype)
        codes = matrix.view(f"u{matrix.dtype.itemsize}")
        histogram = np.bincount(codes.ravel(), minlength=values.size)
        finite_codes = np.isfinite(values)
        nonfinite = {
            "nan": int(histogram[np.isnan(values)].sum()),
            "posinf": int(histogram[values == np.inf].sum()),
            "neginf": int(histogram[values == -np.inf].sum()),
        }
        if any(nonfinite.values()):
            codes = np.where(finite_codes[codes], codes, 0).astype(codes.dtype)
            histogram = np.where(finite_codes, histogram, 0)
            histogram[0] += sum(nonfinite.values())
        occupied = np.flatnonzero(histogram)
        exact, counts = values[occupied], histogram[occupied]
        clean = codes.view(matrix.dtype)
    else:
        wide = matrix.astype(np.float64)
        nonfinite = {
            "nan": int(np.count_nonzero(np.isnan(wide))),
            "posinf": int(np.count_nonzero(wide == np.inf)),
            "neginf": int(np.count_nonzero(wide == -np.inf)),
        }
        if any(nonfinite.values()):
            wide = np.where(np.isfinite(wide), wide, 0.0)
        exact, counts = wide.ravel(), None
        clean = wide.astype(np.float32)
    finite = matrix.size - sum(nonfinite.values())
    amax = float(np.max(np.abs(exact), initial=0.0))
    blocks = _dispatch_blocks(clean, "gradient" if gradient else "weight", amax)
    weights = 1 if counts is None else counts
    norm_sq = float(np.sum(weights * np.square(exact)))
    tallies: dict[str, _Tally] = {}
    for fmt in ("bfloat16", "float16"):
        tallies[fmt] = _Tally(*_cast_tally(exact, counts, 1.0, fmt), 1.0, 1.0)
    fp8 = E5M2 if gradient else E4M3
    scale = np.float32(scale_from_amax(jnp.float32(amax), fp8, jnp.float32(1)))
    inverse = 1.0 / float(scale)
    tallies["float8_current"] = _Tally(*_cast_tally(exact, counts, scale, fp8), inverse, inverse)
    if narrow:
        rowwise, columnwise = _mx_cells(codes, values, 1), _mx_cells(codes, values, 0)
    else:
        rowwise, columnwise = _mx_direct(wide, 1), _mx_direct(wide, 0)
    tallies["mxfp8"] = rowwise.worse(columnwise)
    tallies.update(_collect_blocks(*blocks))
    return TensorStats(
        nonfinite=nonfinite,
        finite=finite,
        recipes={name: tallies[name].stats(finite, norm_sq) for name in RECIPES},
    )
