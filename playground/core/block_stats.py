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
    per_tensor_float8_output_rel_error  = the same for ``core.float8`` (E4M3, current scaling)

with x @ W in float32 at the highest precision (its error is far below the recipes'; a norm of 0
gives NaN). Functions return plain Python numbers and
numpy arrays, ready for JSON.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.block_formats import BlockRecipe, element_facts
from playground.core.block_matmul import block_matmul, empty_meta, weight_tile
from playground.core.block_quantize import BlockQuantized, quantize
from playground.core.float8 import FORWARD_FORMAT, float8_matmul, scale_from_amax
from playground.core.float8 import quantize as float8_quantize

OPERAND_ROLES = ("input", "kernel", "gradient")
# One compiled program per shape and recipe, rather than one per operation run eagerly.
_quantize = jax.jit(quantize, static_argnums=(1, 2))
CLASSES = ("flushed", "saturated", "kept")


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


def _classes(values: np.ndarray, elements: np.ndarray, saturated: np.ndarray, fmt: str):
    """Boolean masks (flushed, saturated, kept, subnormal) of same-shaped arrays."""
    live = (values != 0) & np.isfinite(values)
    flushed = live & (elements == 0)
    clipped = live & saturated & ~flushed
    kept = live & ~flushed & ~clipped
    subnormal = kept & (np.abs(elements) < element_facts(fmt).smallest_normal)
    return live, {"flushed": flushed, "saturated": clipped, "kept": kept}, subnormal


def _shares(counts: dict[str, np.ndarray], nonzero: np.ndarray) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore", divide="ignore"):
        return {name: count / nonzero for name, count in counts.items()}


def operand_stats(values: jax.Array | np.ndarray, quantized: BlockQuantized, fmt: str):
    """The OperandStats of ``values`` quantized as ``quantized`` into element format ``fmt``."""
    tile = quantized.tile
    values = np.asarray(values, np.float32)
    extra = (-values.shape[0] % tile[0], -values.shape[1] % tile[1])
    padded = np.pad(values, ((0, extra[0]), (0, extra[1])))  # as pad_to_tiles, on the host
    live, masks, subnormal = _classes(
        padded, np.asarray(quantized.elements), np.asarray(quantized.saturated), fmt
    )
    grid = quantized.scales.shape

    def per_block(mask: np.ndarray) -> np.ndarray:
        return mask.reshape(grid[0], tile[0], grid[1], tile[1]).sum(axis=(1, 3))

    counts = {name: int(mask.sum()) for name, mask in masks.items()}
    nonzero = int(live.sum())
    block_counts = {name: per_block(mask) for name, mask in masks.items()}
    tensor_log2 = float(np.log2(np.asarray(quantized.tensor_scale, np.float64)))
    return OperandStats(
        size=int(np.prod(quantized.shape)),
        nonzero=nonzero,
        counts=counts,
        subnormal=int(subnormal.sum()),
        shares={k: float(v) for k, v in _shares(counts, np.float64(nonzero)).items()},
        block_shares=_shares(block_counts, per_block(live).astype(np.float64)),
        scale_log2=np.asarray(quantized.scale_log2, np.float64) + tensor_log2,
    )


def recipe_operand_stats(values, recipe: BlockRecipe, role: str) -> OperandStats:
    """The OperandStats of ``values`` as ``recipe`` quantizes an operand of ``role``
    (round-to-nearest: the statistics of a stochastically rounded gradient vary by draw)."""
    quantized = _quantize(jnp.asarray(values, jnp.float32), role_tile(recipe, role), recipe)
    return operand_stats(values, quantized, recipe.element_format)


@jax.jit
def _per_tensor_float8(values: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Current scaling's scale s of ``values`` and their E4M3 elements, in one program."""
    scale = scale_from_amax(jnp.max(jnp.abs(values)), FORWARD_FORMAT, jnp.float32(1))
    elements, _ = float8_quantize(values, FORWARD_FORMAT, scale)
    return scale, elements.astype(jnp.float32)


def per_tensor_float8_stats(values) -> OperandStats:
    """The OperandStats of ``values`` under per-tensor float8 (E4M3, current scaling): one
    block, the whole tensor, with scale 1 / s (``core.float8``)."""
    values = np.asarray(values, np.float32)
    scale, elements = (np.asarray(part) for part in _per_tensor_float8(jnp.asarray(values)))
    scaled = values * scale
    quantized = BlockQuantized(
        elements=elements,
        scales=(np.float32(1) / scale).reshape(1, 1),
        scale_log2=-np.log2(scale).reshape(1, 1),
        tensor_scale=np.float32(1),
        saturated=np.abs(scaled) > element_facts(FORWARD_FORMAT).overflow_edge,
        shape=values.shape,
        tile=values.shape,
        power_of_two=False,
    )
    return operand_stats(values, quantized, FORWARD_FORMAT)


@functools.partial(jax.jit, static_argnums=2)
def _forwards(x: jax.Array, kernel: jax.Array, recipe: BlockRecipe):
    """The recipe's forward x @ kernel, per-tensor float8's (current scaling), and the exact
    product's stand-in: float32 at the highest precision, whose own relative error (about 1e-7
    per sum of D_in terms) is far below the recipes' (about 1e-2), in one program, where a
    float64 product on the host took 0.2 s at the largest shape."""
    block = block_matmul(x, kernel, empty_meta(), jax.random.key(0), recipe, False, False)
    reference = jnp.matmul(x, kernel, precision=jax.lax.Precision.HIGHEST)
    return block, float8_matmul(x, kernel, empty_meta(), "current"), reference


def _rel_error(out: jax.Array, reference: np.ndarray) -> float:
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = np.asarray(out, np.float64) - reference
        return float(np.linalg.norm(diff) / np.linalg.norm(reference))


def recipe_comparison(x, kernel, recipe: BlockRecipe) -> dict[str, float]:
    """The relative errors of the forward matmul x @ kernel (see the module rule), under the
    JSON keys of ``recipe_comparison``."""
    x, kernel = jnp.asarray(x, jnp.float32), jnp.asarray(kernel, jnp.float32)
    block, per_tensor, reference = _forwards(x, kernel, recipe)
    reference = np.asarray(reference, np.float64)
    return {
        "output_rel_error": _rel_error(block, reference),
        "per_tensor_float8_output_rel_error": _rel_error(per_tensor, reference),
    }
