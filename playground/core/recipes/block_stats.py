"""What a block-scaled recipe does to each matmul operand, and to the first matmul's output.

Rule. Each nonzero finite entry of an operand lands in exactly one class when quantized::

    flushed    its element is 0
    saturated  its scaled magnitude was beyond the format's overflow edge (stored as +-max)
    kept       otherwise (``subnormal``: of these, the ones stored as a subnormal element, with
               fewer significant bits than a normal one)

Shares are of the nonzero entries, per tensor and per block (a block's padding is not counted;
a block of zeros has NaN shares). The scale map is log2(block scale x tensor scale) per block.
The output comparison, on one batch::

    output_rel_error                    = ||Q-matmul(x, W) - x @ W|| / ||x @ W||   (the recipe)
    per_tensor_float8_output_rel_error  = the same for ``core.recipes.float8`` (E4M3, current
    scaling) median_row_rel_error                = median over the rows i of x @ W that are not all
                                          zero of ||row_i difference|| / ||row_i of x @ W||
    per_tensor_float8_median_row_rel_error  the same for per-tensor float8

with x @ W in float32 at the highest precision (its error is far below the recipes'; a norm of 0
gives NaN); each norm is the float64 root of its rows' squared float32 norms, summed.

The norm weighs each row by the size of its output, so a few large rows (an outlier's) can
decide it; the median is a typical row's error (NaN when every row is zero).

Two halves: the functions marked "in a program" run inside a compiled program and return only
small arrays (counts per block, scales, the products' row norms); the host functions turn those
into OperandStats and errors of plain Python numbers and numpy arrays, ready for JSON.
``recipe_operand_stats``, ``per_tensor_float8_stats`` and ``recipe_comparison`` do both for one
operand or product; ``core.recipes.block_report`` measures a whole report's in one program, and the
step's program (``core.step.report``) measures the comparison beside the step, whose own first
products it shares.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.recipes.block_formats import BlockRecipe, element_facts
from playground.core.recipes.block_matmul import block_matmul, empty_meta, weight_tile
from playground.core.recipes.block_quantize import pad_to_tiles, quantize, round_to_nearest
from playground.core.recipes.float8 import FORWARD_FORMAT, float8_matmul, scale_from_amax

OPERAND_ROLES = ("input", "kernel", "gradient")
CLASSES = ("flushed", "saturated", "kept")
COMPARISON_KEYS = (
    "output_rel_error",
    "per_tensor_float8_output_rel_error",
    "median_row_rel_error",
    "per_tensor_float8_median_row_rel_error",
)


@dataclass(frozen=True)
class OperandStats:
    """One quantized operand's classes (see the module rule): counts per tensor, shares of
    the nonzero entries per tensor and per block (arrays of the block grid's shape), and the
    log2 scale map."""

    size: int
    nonzero: int
    counts: dict[str, int]
    subnormal: int
    shares: dict[str, float]
    block_shares: dict[str, np.ndarray]
    scale_log2: np.ndarray


def role_tile(recipe: BlockRecipe, role: str) -> tuple[int, int]:
    """The tile an operand of ``role`` is quantized with in the forward matmul (the gradient:
    in the input-gradient matmul)."""
    if role not in OPERAND_ROLES:
        raise ValueError(f"role must be one of {', '.join(OPERAND_ROLES)}; got {role!r}")
    return weight_tile(recipe, forward=True) if role == "kernel" else (1, recipe.block)


def class_counts(values: jax.Array, elements: jax.Array, saturated: jax.Array, tile, fmt):
    """In a program: per block of ``tile``, the nonzero finite entries (``live``) and those
    ``flushed`` and ``saturated`` (grids of int32; kept = live - flushed - saturated, as the
    classes split the live entries), and the tensor's ``subnormal`` count, of same-shaped
    (padded) arrays: one pass that returns only these small arrays."""
    live = (values != 0) & jnp.isfinite(values)
    flushed = live & (elements == 0)
    clipped = live & saturated & ~flushed
    kept = live & ~flushed & ~clipped
    subnormal = kept & (jnp.abs(elements) < element_facts(fmt).smallest_normal)
    grid = (values.shape[0] // tile[0], values.shape[1] // tile[1])
    masks = [
        mask.astype(jnp.int32).reshape(grid[0], tile[0], grid[1], tile[1])
        for mask in (live, flushed, clipped, subnormal)
    ]
    # One reduction of the four masks together: each entry's classes are worked out once,
    # where a sum per mask would work them out (the quantization too) in each of its loops.
    counts = jax.lax.reduce(
        tuple(masks), (jnp.int32(0),) * 4, lambda a, b: tuple(map(jnp.add, a, b)), (1, 3)
    )
    return dict(zip(("live", "flushed", "saturated"), counts[:3], strict=True)) | {
        "subnormal": jnp.sum(counts[3])
    }


def _shares(counts: dict[str, np.ndarray], nonzero: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return {name: count / nonzero for name, count in counts.items()}


def stats_from_counts(counts, size: int, scale_log2: np.ndarray) -> OperandStats:
    """The OperandStats of an operand of ``size`` entries from its ``class_counts`` (host)."""
    live, flushed, saturated = (np.asarray(counts[k], np.int64) for k in ("live", *CLASSES[:2]))
    block_counts = {"flushed": flushed, "saturated": saturated, "kept": live - flushed - saturated}
    totals = {name: int(count.sum()) for name, count in block_counts.items()}
    nonzero = int(live.sum())
    return OperandStats(
        size=size,
        nonzero=nonzero,
        counts=totals,
        subnormal=int(counts["subnormal"]),
        shares={k: float(v) for k, v in _shares(totals, np.float64(nonzero)).items()},
        block_shares=_shares(block_counts, live.astype(np.float64)),
        scale_log2=scale_log2,
    )


def recipe_measure(values: jax.Array, recipe: BlockRecipe, role: str):
    """In a program: the class counts of ``values`` as ``recipe`` quantizes an operand of
    ``role`` (round-to-nearest), its log2 block scales and its tensor scale."""
    quantized = quantize(values, role_tile(recipe, role), recipe)
    padded = pad_to_tiles(values.astype(jnp.float32), quantized.tile)
    counts = class_counts(
        padded, quantized.elements, quantized.saturated, quantized.tile, recipe.element_format
    )
    return counts, quantized.scale_log2, quantized.tensor_scale


def recipe_stats(measured, shape: tuple[int, int]) -> OperandStats:
    """The OperandStats of an operand of ``shape`` from its ``recipe_measure`` (host): the
    scale map is log2(block scale) + log2(tensor scale), in float64."""
    counts, scale_log2, tensor_scale = measured
    return stats_from_counts(counts, int(np.prod(shape)), _scale_map(scale_log2, tensor_scale))


def _scale_map(block_log2, tensor_scale) -> np.ndarray:
    """log2(block scale) + log2(tensor scale), float64."""
    tensor_log2 = float(np.log2(np.asarray(tensor_scale, np.float64)))
    return np.asarray(block_log2, np.float64) + tensor_log2


def recipe_operand_stats(values, recipe: BlockRecipe, role: str) -> OperandStats:
    """The OperandStats of ``values`` as ``recipe`` quantizes an operand of ``role``
    (round-to-nearest: the statistics of a stochastically rounded gradient vary by draw)."""
    values = jnp.asarray(values, jnp.float32)
    return recipe_stats(_recipe_measure(values, recipe, role), values.shape)


def per_tensor_measure(values: jax.Array):
    """In a program: the class counts of ``values`` under per-tensor float8 (E4M3, current
    scaling: scale s), one block, the whole tensor, and s."""
    values = values.astype(jnp.float32)
    scale = scale_from_amax(jnp.max(jnp.abs(values)), FORWARD_FORMAT, jnp.float32(1))
    facts = element_facts(FORWARD_FORMAT)
    scaled = values * scale
    # The E4M3 cast of ``core.recipes.float8`` for every finite entry (inf and NaN are not counted),
    # by the cheaper rounding of ``core.recipes.block_quantize``.
    elements = round_to_nearest(jnp.clip(scaled, -facts.max, facts.max), FORWARD_FORMAT)
    saturated = jnp.abs(scaled) > facts.overflow_edge
    return class_counts(values, elements, saturated, values.shape, FORWARD_FORMAT), scale


def per_tensor_stats(measured, shape: tuple[int, int]) -> OperandStats:
    """The OperandStats of an operand of ``shape`` from its ``per_tensor_measure`` (host): the
    block scale is 1 / s, so its log2 is -log2(s) (in float32, then float64)."""
    counts, scale = measured
    block_log2 = -np.log2(np.asarray(scale, np.float32)).reshape(1, 1)
    return stats_from_counts(counts, int(np.prod(shape)), _scale_map(block_log2, np.float32(1)))


def per_tensor_float8_stats(values) -> OperandStats:
    """The OperandStats of ``values`` under per-tensor float8 (E4M3, current scaling): one
    block, the whole tensor, with scale 1 / s (``core.recipes.float8``)."""
    values = jnp.asarray(values, jnp.float32)
    return per_tensor_stats(_per_tensor_measure(values), values.shape)


# One compiled program per shape and recipe, rather than one per operation run eagerly.
_recipe_measure = jax.jit(recipe_measure, static_argnums=(1, 2))
_per_tensor_measure = jax.jit(per_tensor_measure)


def forwards(x: jax.Array, kernel: jax.Array, recipe: BlockRecipe):
    """In a program: the recipe's forward x @ kernel, per-tensor float8's (current scaling),
    and the exact product's stand-in: float32 at the highest precision, whose own relative
    error (about 1e-7 per sum of D_in terms) is far below the recipes' (about 1e-2), and
    which, unlike a float64 product on the host, stays inside the program. Inside the step's program
    the first and the last are the step's own first products (XLA computes each once)."""
    block = block_matmul(x, kernel, empty_meta(), jax.random.key(0), recipe, False, False)
    reference = jnp.matmul(x, kernel, precision=jax.lax.Precision.HIGHEST)
    return block, float8_matmul(x, kernel, empty_meta(), "current"), reference


def row_norms(values: jax.Array) -> jax.Array:
    """In a program: the 2-norm of each row of ``values`` in float32, each row scaled by its
    largest magnitude first, so that its largest squares neither overflow nor flush (inf where
    a row holds inf, NaN where one holds NaN); a sum of D_out squares, relative error about
    1e-6."""
    peak = jnp.max(jnp.abs(values), axis=1)
    unit = jnp.where((peak > 0) & jnp.isfinite(peak), peak, 1)
    norms = peak * jnp.sqrt(jnp.sum(jnp.square(values / unit[:, None]), axis=1))
    return jnp.where(jnp.isinf(peak), jnp.inf, norms)


def comparison_measure(x: jax.Array, kernel: jax.Array, recipe: BlockRecipe) -> jax.Array:
    """In a program: a (3, N) float32 array, the row norms of the recipe's product minus the
    reference, of per-tensor float8's minus the reference, and of the reference (``forwards``),
    in place of the three (N, M) products themselves."""
    block, per_tensor, reference = forwards(x, kernel, recipe)
    return jnp.stack(
        [row_norms(block - reference), row_norms(per_tensor - reference), row_norms(reference)]
    )


_comparison_measure = jax.jit(comparison_measure, static_argnums=2)


def comparison_from(norms) -> dict[str, float]:
    """The relative errors of the two products against the reference from their row norms
    (``comparison_measure``), in float64 on the host, under COMPARISON_KEYS: in norm (the
    rows' squares summed), and the median of the rows' own."""
    rows = np.asarray(norms, np.float64)
    block, per_tensor, reference = np.sqrt(np.sum(np.square(rows), 1))
    live = rows[2] > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        errors = [block / reference, per_tensor / reference]
        per_row = rows[:2, live] / rows[2, live]
    medians = np.median(per_row, axis=1) if live.any() else [np.nan, np.nan]
    return dict(zip(COMPARISON_KEYS, map(float, [*errors, *medians]), strict=True))


def recipe_comparison(x, kernel, recipe: BlockRecipe) -> dict[str, float]:
    """The relative errors of the forward matmul x @ kernel (see the module rule), under the
    JSON keys of ``recipe_comparison``."""
    x, kernel = jnp.asarray(x, jnp.float32), jnp.asarray(kernel, jnp.float32)
    return comparison_from(_comparison_measure(x, kernel, recipe))
