"""What each block-scaled recipe does to one tensor: its own quantizer, its own scales.

Rule: the tensor is read as float32 (numpy's exact cast) and as rows along its last axis (a
scalar is 1 x 1, a vector one row), as the matmul of a PyTorch ``nn.Linear`` contracts its
input and its weight. Each row is cut into the recipe's 1-D blocks (``block`` values, the
row's last block zero-padded), and every block is quantized by
``core.recipes.block_quantize.quantize``
with the recipe's block scale (and NVFP4's tensor scale, from the whole tensor's amax), rounded
to nearest (the forward cast: no stochastic rounding, no Hadamard rotation). Over the tensor's
finite nonzero entries, as for a plain cast (``core.tensors.formats``)::

    zero       share whose stored element is 0
    subnormal  share whose element is a nonzero subnormal of the element format
    saturated  share the quantizer clipped past the element format's overflow edge
    overflow   share whose dequantized value is not finite (a float64 entry past float32)
    rel_error  ||element x block scale x tensor scale - x|| / ||x||, dequantized in float64

To compile one program per recipe, whatever the tensors' shapes, the blocks are quantized in
slices of SLICE_ROWS rows (SLICES of them per call, ``jax.vmap``, the slices of every tensor
of a file sharing the calls): SLICE_ROWS - 1 of a tensor's blocks, then a carrier block
holding only that tensor's amax, so that every slice's tensor scale is its tensor's own;
one-level recipes' blocks do not see each other.

What this backend does: the quantizer runs in float32 under XLA on CPU, which reads a float32
subnormal input as 0. ``flushed_inputs`` counts the finite nonzero entries whose float32 value
is subnormal (or 0: a float64 entry below float32's range); they are stored as 0 here.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.recipes.block_formats import BlockRecipe, element_facts
from playground.core.recipes.block_quantize import quantize
from playground.core.tensors.formats import Shares, rel_error, share

SLICE_ROWS = 16
SLICES = 256


@functools.cache
def _quantize_slices(recipe: BlockRecipe):
    """(SLICES, SLICE_ROWS, block) float32 -> each slice quantized on its own, compiled once."""
    one = functools.partial(quantize, tile=(1, recipe.block), recipe=recipe)
    return jax.jit(jax.vmap(one))


def _blocks(values: np.ndarray, block: int, dtype: type) -> np.ndarray:
    """(blocks, block) of ``dtype``: the rows along the last axis, each zero-padded to whole
    blocks."""
    rows = values.reshape(-1, values.shape[-1] if values.ndim else 1).astype(dtype)
    if rows.shape[1] % block:
        padded = np.zeros((rows.shape[0], -(-rows.shape[1] // block) * block), dtype)
        padded[:, : rows.shape[1]] = rows
        rows = padded
    return rows.reshape(-1, block)


def _slices(blocks: np.ndarray) -> np.ndarray:
    """(slices, SLICE_ROWS, block): the blocks, SLICE_ROWS - 1 to a slice (the last padded
    with zero blocks), each slice closed by the carrier block of the tensor's amax."""
    per_slice = SLICE_ROWS - 1
    count, block = blocks.shape
    slices = max(1, -(-count // per_slice))
    padded = np.zeros((slices * per_slice, block), np.float32)
    padded[:count] = blocks
    with np.errstate(invalid="ignore"):
        carrier = np.max(np.abs(blocks), initial=0.0)
    carriers = np.zeros((slices, 1, block), np.float32)
    carriers[:, 0, 0] = carrier
    return np.concatenate([padded.reshape(slices, per_slice, block), carriers], axis=1)


def _quantized_all(recipe: BlockRecipe, batches: np.ndarray) -> tuple[np.ndarray, ...]:
    """(elements, scale of each block as float64, saturated) of every slice, SLICES a call,
    the carrier rows dropped."""
    total = len(batches)
    calls = -(-total // SLICES)
    padded = np.zeros((calls * SLICES, *batches.shape[1:]), np.float32)
    padded[:total] = batches
    elements, scales, saturated = [], [], []
    for call in range(calls):
        quantized = _quantize_slices(recipe)(
            jnp.asarray(padded[call * SLICES : (call + 1) * SLICES])
        )
        elements.append(np.asarray(quantized.elements)[:, :-1])
        saturated.append(np.asarray(quantized.saturated)[:, :-1])
        if recipe.power_of_two_scales:
            log2 = np.asarray(quantized.scale_log2)[:, :-1].astype(np.int64)
            scales.append(np.ldexp(1.0, log2))
        else:
            block_scales = np.asarray(quantized.scales, np.float64)[:, :-1]
            tensor = np.asarray(quantized.tensor_scale, np.float64)[:, None, None]
            scales.append(block_scales * tensor)
    return tuple(np.concatenate(parts)[:total] for parts in (elements, scales, saturated))


def block_shares(tensors: list[np.ndarray], recipe: BlockRecipe) -> list[tuple[Shares, int]]:
    """What ``recipe`` does to each of ``tensors`` (see the module rule), and each one's
    ``flushed_inputs``; the slices of all of them share the calls."""
    with np.errstate(over="ignore"):  # a float64 entry past float32 is inf, and counted
        inputs = [_blocks(np.asarray(values), recipe.block, np.float32) for values in tensors]
    slices = [_slices(blocks) for blocks in inputs]
    elements, scales, saturated = _quantized_all(recipe, np.concatenate(slices))
    smallest_normal = element_facts(recipe.element_format).smallest_normal
    results, first = [], 0
    for values, blocks, own in zip(tensors, inputs, slices, strict=True):
        count, span = len(blocks), slice(first, first + len(own))
        first += len(own)
        exact = _blocks(np.asarray(values), recipe.block, np.float64)
        live = np.isfinite(exact) & (exact != 0)
        total = int(np.count_nonzero(live))
        if total == 0:
            results.append((Shares(None, None, None, None, None), 0))
            continue
        element = elements[span].reshape(-1, recipe.block)[:count].astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            stored = element * scales[span].reshape(-1, 1)[:count]
        magnitude = np.abs(element)
        tiny = np.abs(blocks.astype(np.float64)) < np.finfo(np.float32).smallest_normal
        shares = Shares(
            zero=share(live & (element == 0), total),
            subnormal=share(live & (magnitude > 0) & (magnitude < smallest_normal), total),
            overflow=share(live & ~np.isfinite(stored), total),
            saturated=share(live & saturated[span].reshape(-1, recipe.block)[:count], total),
            rel_error=rel_error(stored, exact),
        )
        results.append((shares, int(np.count_nonzero(live & tiny))))
    return results
