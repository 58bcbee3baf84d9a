"""Where a gradient's entries land when a block recipe stores them with its block scales.

Rule: each gradient is laid out as one matrix (a vector as one row, a tensor as rows of its
last axis) and quantized by ``block_quantize.quantize`` in the recipe's 1-D blocks along that
axis (1 x block: 32 for MXFP8, 128 for fp8_block, 16 for NVFP4), rounded to nearest. An entry's
place is its magnitude in its block's units::

    units = |value| / (block_scale x tensor_scale)

the number the quantizer rounds into the element format, so the element format's own ranges
apply to it. Of the entries nonzero in the reference gradient (float32's)::

    lost to zero  its element is 0: in its block's units it is at most half the element
                  format's smallest subnormal (for the block's largest entry at about the
                  format's max: below amax / (2 max / smallest subnormal), amax / 24 in E2M1,
                  amax / 458752 in E4M3), or its block's own scale flushed to zero (NVFP4's
                  E4M3 block scale of a block far below the tensor's amax)
    subnormal     kept as a nonzero subnormal element, with fewer significant bits
    saturated     beyond the element format's overflow edge: stored as +-max
    non-finite    inf or NaN (kept as it is)

A loss scale S multiplies every entry of a block and so its amax: the block's scale follows it
(within the scale format's range: E8M0 2^-127 to 2^127, float32, or E4M3 times a float32 tensor
scale), and the units, hence these counts, do not change.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import jax
import numpy as np

from playground.core.recipes.block_formats import BlockRecipe, element_facts
from playground.core.recipes.block_quantize import quantize

KINDS = ("lost to zero", "subnormal", "saturated", "non-finite")


@functools.cache
def _quantizer(recipe: BlockRecipe):
    # One compiled program per recipe and gradient shape.
    return jax.jit(lambda values: quantize(values, (1, recipe.block), recipe))


def _as_rows(values: np.ndarray) -> np.ndarray:
    values = np.asarray(values, np.float32)
    return values.reshape(1, -1) if values.ndim < 2 else values.reshape(-1, values.shape[-1])


def block_places(
    values: np.ndarray, recipe: BlockRecipe
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(units, elements, saturated) of ``values`` under the module rule, each of
    ``values``' size, flattened: float64 units (NaN where the value is not finite), the
    element-format values stored, and whether each entry saturated."""
    rows = _as_rows(values)
    quantized = _quantizer(recipe)(rows)
    count_rows, count_cols = rows.shape
    elements = np.asarray(quantized.elements, np.float64)[:count_rows, :count_cols]
    saturated = np.asarray(quantized.saturated)[:count_rows, :count_cols]
    # Each entry's divisor, in float64: an E8M0 scale as 2^e exactly, even where it is no
    # normal float32; a float32 or E4M3 scale as stored.
    per_block = (
        np.exp2(np.asarray(quantized.scale_log2, np.float64))
        if recipe.power_of_two_scales
        else np.asarray(quantized.scales, np.float64)
    )
    divisor = np.repeat(per_block, recipe.block, axis=1)[:, :count_cols]
    divisor = divisor * float(quantized.tensor_scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        units = np.where(divisor > 0, np.abs(rows.astype(np.float64)) / divisor, 0.0)
    units = np.where(np.isfinite(rows), units, np.nan)
    return units.ravel(), elements.ravel(), saturated.ravel()


def place_counts(
    gradients: Sequence[np.ndarray], reference: Sequence[np.ndarray], recipe: BlockRecipe
) -> dict[str, int]:
    """The module rule's counts over all ``gradients`` (each quantized on its own), of the
    entries nonzero in ``reference`` (the same shapes)."""
    counts = dict.fromkeys(KINDS, 0)
    subnormal_edge = element_facts(recipe.element_format).smallest_normal
    for values, base in zip(gradients, reference, strict=True):
        _, elements, saturated = block_places(values, recipe)
        flat = np.asarray(values, np.float64).ravel()
        live = (np.asarray(base).ravel() != 0) & np.isfinite(flat)
        counts["lost to zero"] += int(np.sum(live & (elements == 0)))
        counts["subnormal"] += int(
            np.sum(live & (elements != 0) & (np.abs(elements) < subnormal_edge))
        )
        counts["saturated"] += int(np.sum(live & saturated))
        counts["non-finite"] += int(np.sum(~np.isfinite(flat)))
    return counts


def block_magnitude_counts(
    float32_grads: Sequence[np.ndarray], scaled_grads: Sequence[np.ndarray], recipe: BlockRecipe
) -> dict:
    """``formats.metrics.magnitude_counts``'s shape for a block recipe: "before scaling" is
    float32's gradient stored by the recipe as it is (S = 1), "after scaling" the scaled
    gradients the backward pass produced, stored by the recipe; each of ``place_counts``, of
    the entries nonzero in float32's gradient."""
    return {
        "before scaling": place_counts(float32_grads, float32_grads, recipe),
        "after scaling": place_counts(scaled_grads, float32_grads, recipe),
        "entries": {"total": int(sum(np.size(g) for g in float32_grads))},
    }


def block_units(gradients: Sequence[np.ndarray], recipe: BlockRecipe) -> np.ndarray:
    """Every entry of ``gradients`` (each quantized on its own) in its block's units, flattened
    and concatenated (NaN where not finite)."""
    return np.concatenate([block_places(values, recipe)[0] for values in gradients])
