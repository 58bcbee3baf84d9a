"""A typed list of numbers as a block recipe stores it: its shared scales and each stored value.

Rule: the list is one row, quantized by ``core.recipes.block_quantize.quantize`` in blocks of the
recipe's 1-D size (the last block zero-padded; ``last_block_size`` values are real), rounded to
nearest. For each entry::

    element  the element-format value stored (E4M3 or E2M1), in the block's scaled units
    stored   element x block scale x tensor scale, the value a matmul reads
    error    stored - value (0 where the value is stored exactly)
    class    "zero", "flushed", "saturated" or "kept" (``core.recipes.block_stats``'s classes)

and for each block: its scale (and log2), in the recipe's scale format. Plain Python numbers,
JSON-able (a non-finite input stays inf or NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.recipes.block_formats import BlockRecipe
from playground.core.recipes.block_quantize import last_block_size, quantize

# The longest list the view takes (the inspector's lists are short).
MAX_VALUES = 256
# One compiled program per list length, rather than one per operation run eagerly.
_quantize = jax.jit(quantize, static_argnums=(1, 2))


def _entry_class(value: float, element: float, saturated: bool) -> str:
    if value == 0:
        return "zero"
    if element == 0 and np.isfinite(value):
        return "flushed"
    return "saturated" if saturated else "kept"


def block_view(values: Sequence[float], recipe: BlockRecipe) -> dict[str, Any]:
    """``values`` as ``recipe`` stores them (see the rule); ValueError for an empty or too
    long list."""
    if not 1 <= len(values) <= MAX_VALUES:
        raise ValueError(f"values must hold 1 to {MAX_VALUES} numbers; got {len(values)}")
    row = np.asarray(values, np.float32).reshape(1, -1)
    quantized = _quantize(jnp.asarray(row), (1, recipe.block), recipe)
    stored = np.asarray(quantized.dequantized(), np.float64)[0]
    elements = np.asarray(quantized.elements, np.float64)[0, : row.shape[1]]
    saturated = np.asarray(quantized.saturated)[0, : row.shape[1]]
    inputs = row.astype(np.float64)[0]
    with np.errstate(invalid="ignore"):
        errors = stored - inputs
    entries = [
        {
            "value": float(value),
            "element": float(element),
            "stored": float(kept),
            "error": float(error),
            "class": _entry_class(float(value), float(element), bool(clipped)),
        }
        for value, element, kept, error, clipped in zip(
            inputs, elements, stored, errors, saturated, strict=True
        )
    ]
    blocks = [
        {"scale": float(scale), "scale_log2": float(log2)}
        for scale, log2 in zip(
            np.asarray(quantized.scales)[0], np.asarray(quantized.scale_log2)[0], strict=True
        )
    ]
    return {
        "recipe": recipe.name,
        "element_format": recipe.element_format,
        "scale_format": recipe.scale_format,
        "block": recipe.block,
        "last_block_size": last_block_size(row.shape[1], recipe.block),
        "tensor_scale": float(quantized.tensor_scale),
        "blocks": blocks,
        "entries": entries,
    }
