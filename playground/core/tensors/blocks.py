"""What each block-scaled recipe does to one tensor: its own quantizer, its own scales.

Rule: the tensor is read as float32 (numpy's exact cast) and as rows along its last axis (a
scalar is 1 x 1, a vector one row), as the matmul of a PyTorch ``nn.Linear`` contracts its
input and its weight. Each row is cut into the recipe's 1-D blocks (``block`` values, the
row's last block zero-padded), and every block is quantized by ``core.block_quantize.quantize``
with the recipe's block scale (and NVFP4's tensor scale, from the whole tensor's amax), rounded
to nearest (the forward cast: no stochastic rounding, no Hadamard rotation). Over the tensor's
finite nonzero entries, as for a plain cast (``core.tensors.formats``)::

    zero       share whose stored element is 0
    subnormal  share whose element is a nonzero subnormal of the element format
    saturated  share the quantizer clipped past the element format's overflow edge
    overflow   share whose dequantized value is not finite (a float64 entry past float32)
    rel_error  ||element x block scale x tensor scale - x|| / ||x||, dequantized in float64

To compile one program per recipe, whatever the tensors' shapes, the blocks are quantized in
slices of SLICE_ROWS rows (SLICES of them per call, ``jax.vmap``): SLICE_ROWS - 1 of the
tensor's blocks, then a carrier block holding only the tensor's amax, so that every slice's
tensor scale is the tensor's own; one-level recipes' blocks do not see each other.

What this backend does: the quantizer runs in float32 under XLA on CPU, which reads a float32
subnormal input as 0. ``flushed_inputs`` counts the finite nonzero entries whose float32 value
is subnormal (or 0: a float64 entry below float32's range); they are stored as 0 here.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.block_formats import BlockRecipe, element_facts
from playground.core.block_quantize import quantize
from playground.core.tensors.formats import Shares, rel_error, share

SLICE_ROWS = 64
SLICES = 64


@functools.cache
def _quantize_slices(recipe: BlockRecipe):
    """(SLICES, SLICE_ROWS, block) float32 -> each slice quantized on its own, compiled once."""
    one = functools.partial(quantize, tile=(1, recipe.block), recipe=recipe)
    return jax.jit(jax.vmap(one))


def _blocks(values: np.ndarray, block: int, dtype: type) -> np.ndarray:
    """(blocks, block) of ``dtype``: the rows along the last axis, each zero-padded to whole
    blocks."""
    rows = values.reshape(-1, values.shape[-1] if values.ndim else 1).astype(dtype)
    extra = -rows.shape[1] % block
    return np.pad(rows, ((0, 0), (0, extra))).reshape(-1, block)


def _joined(parts: list[np.ndarray], width: int, count: int) -> np.ndarray:
    return np.concatenate(parts).reshape(-1, width)[:count]


def _dequantized(
    recipe: BlockRecipe, blocks: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(elements, dequantized in float64, saturated) of ``blocks``, each (blocks, block)."""
    with np.errstate(invalid="ignore"):
        carrier = np.max(np.abs(blocks), initial=0.0)
    per_slice = SLICE_ROWS - 1
    count = len(blocks)
    slices = -(-count // per_slice)
    calls = -(-slices // SLICES)
    padded = np.zeros((calls * SLICES * per_slice, recipe.block), np.float32)
    padded[:count] = blocks
    batch = padded.reshape(calls * SLICES, per_slice, recipe.block)
    carriers = np.zeros((calls * SLICES, 1, recipe.block), np.float32)
    carriers[:, 0, 0] = carrier
    batch = np.concatenate([batch, carriers], axis=1)
    elements, scales, saturated = [], [], []
    for call in range(calls):
        part = jnp.asarray(batch[call * SLICES : (call + 1) * SLICES])
        quantized = _quantize_slices(recipe)(part)
        elements.append(np.asarray(quantized.elements)[:, :per_slice])
        saturated.append(np.asarray(quantized.saturated)[:, :per_slice])
        if recipe.power_of_two_scales:
            log2 = np.asarray(quantized.scale_log2, np.float64)[:, :per_slice]
            scales.append(np.ldexp(1.0, log2.astype(np.int64)))
        else:
            block_scales = np.asarray(quantized.scales, np.float64)[:, :per_slice]
            tensor = np.asarray(quantized.tensor_scale, np.float64)[:, None, None]
            scales.append(block_scales * tensor)
    element_values = _joined(elements, recipe.block, count).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        stored = element_values * _joined(scales, 1, count)
    return element_values, stored, _joined(saturated, recipe.block, count)


def block_shares(values: np.ndarray, recipe: BlockRecipe) -> tuple[Shares, int]:
    """What ``recipe`` does to ``values`` (see the module rule), and ``flushed_inputs``."""
    with np.errstate(over="ignore"):  # a float64 entry past float32 is inf, and counted
        blocks = _blocks(np.asarray(values), recipe.block, np.float32)
    exact = _blocks(np.asarray(values), recipe.block, np.float64)
    live = np.isfinite(exact) & (exact != 0)
    total = int(np.count_nonzero(live))
    if total == 0:
        return Shares(None, None, None, None, None), 0
    elements, stored, saturated = _dequantized(recipe, blocks)
    magnitude = np.abs(elements)
    smallest_normal = element_facts(recipe.element_format).smallest_normal
    tiny = np.abs(blocks.astype(np.float64)) < np.finfo(np.float32).smallest_normal
    shares = Shares(
        zero=share(live & (elements == 0), total),
        subnormal=share(live & (magnitude > 0) & (magnitude < smallest_normal), total),
        overflow=share(live & ~np.isfinite(stored), total),
        saturated=share(live & saturated, total),
        rel_error=rel_error(stored, exact),
    )
    return shares, int(np.count_nonzero(live & tiny))
