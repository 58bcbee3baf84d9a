"""numpy references for the block-scaling panel's numbers, written apart from the code under
test: MXFP8 and per-tensor float8 (E4M3, current scaling) quantization with ml_dtypes' E4M3,
the elements each block recipe (MXFP8, fp8_block, NVFP4) stores by its published rule, and the
relative error of a product in float64; ``reference_quantize``, a whole tensor dequantized by
a block recipe's rule (E2M1's stochastic rounding included), shared by the recipes' and the
registries' tests."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from playground.core.recipes.block_formats import FP8_BLOCK, NVFP4

E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = float(ml_dtypes.finfo(E4M3).max)  # 448
E2M1 = ml_dtypes.float4_e2m1fn
E2M1_MAX = float(ml_dtypes.finfo(E2M1).max)  # 6
E2M1_GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])  # E2M1's magnitudes


def mxfp8(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dequantized values, log2 scale per block): blocks of 32 along each row (the last
    zero-padded), scale 2^ceil(log2(amax / 448)), elements E4M3(value / scale)."""
    rows, cols = values.shape
    padded = np.zeros((rows, math.ceil(cols / 32) * 32), np.float32)
    padded[:, :cols] = values
    blocks = padded.reshape(rows, -1, 32)
    amax = np.abs(blocks).max(axis=-1)
    ratio = np.where(amax > 0, amax, E4M3_MAX).astype(np.float32) / np.float32(E4M3_MAX)
    exponent = np.ceil(np.log2(ratio.astype(np.float64)))
    scale = 2.0 ** exponent[..., None]
    elements = (blocks / scale).astype(np.float32).astype(E4M3).astype(np.float64)
    return (elements * scale).reshape(rows, -1)[:, :cols], exponent


def per_tensor_float8(values: np.ndarray) -> np.ndarray:
    """E4M3(values s) / s with s = 448 / amax, in float64."""
    scale = np.float32(E4M3_MAX / np.abs(values).max())
    return (values * scale).astype(E4M3).astype(np.float64) / scale


def relative_error(out: np.ndarray, reference: np.ndarray) -> float:
    """||out - reference|| / ||reference||, in float64."""
    return float(np.linalg.norm(out - reference) / np.linalg.norm(reference))


def row_errors(out: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Each row's ||out_i - reference_i|| / ||reference_i||, in float64, for the rows of
    ``reference`` that are not all zero."""
    live = np.linalg.norm(reference, axis=1) > 0
    difference = np.linalg.norm((out - reference)[live], axis=1)
    return difference / np.linalg.norm(reference[live], axis=1)


def _blocks(values: np.ndarray, block: int) -> tuple[np.ndarray, int]:
    rows = values.reshape(1, -1) if values.ndim < 2 else values
    cols = rows.shape[1]
    padded = np.zeros((rows.shape[0], math.ceil(cols / block) * block), np.float32)
    padded[:, :cols] = rows
    return padded.reshape(rows.shape[0], -1, block), cols


def block_elements(values: np.ndarray, name: str) -> np.ndarray:
    """The element each entry is stored as, by each recipe's published rule, round to nearest:

    mxfp8      scale 2^ceil(log2(amax / 448)) per 32, element E4M3(v / scale)
    fp8_block  scale amax / 448 (float32) per 128, element E4M3(v / scale)
    nvfp4      tensor scale amax_t / (448 x 6), block scale E4M3(amax_b / ts / 6) per 16,
               element E2M1(clip(v / ts / bs, +-6))
    """
    scaled, rows, cols = _scaled(values, name)
    if name == "nvfp4":
        elements = np.clip(scaled, -E2M1_MAX, E2M1_MAX).astype(E2M1)
    else:
        elements = scaled.astype(E4M3)
    return elements.astype(np.float64).reshape(rows, -1)[:, :cols].ravel()


def block_units(values: np.ndarray, name: str) -> np.ndarray:
    """|v / scale| of ``block_elements``' rule for each entry (of a 2-D ``values``, blocks along
    its rows), before the clip and the rounding: 0 where an NVFP4 block scale is 0."""
    scaled, rows, cols = _scaled(values, name)
    return np.abs(scaled).reshape(rows, -1)[:, :cols]


def _scaled(values: np.ndarray, name: str) -> tuple[np.ndarray, int, int]:
    """(v / scale per block by ``block_elements``' rule, rows, cols), the blocks on the last
    axis: float64 for MXFP8's power-of-two scale (exact), float32 otherwise."""
    block = {"mxfp8": 32, "fp8_block": 128, "nvfp4": 16}[name]
    blocks, cols = _blocks(np.asarray(values, np.float32), block)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    if name == "mxfp8":
        ratio = (np.where(amax > 0, amax, 1) / np.float32(E4M3_MAX)).astype(np.float64)
        scale = np.exp2(np.ceil(np.log2(ratio)))
        return blocks / scale, blocks.shape[0], cols
    if name == "fp8_block":
        scale = np.where(amax > 0, amax / np.float32(E4M3_MAX), np.float32(1))
        return (blocks / scale).astype(np.float32), blocks.shape[0], cols
    tensor = np.float32(max(np.abs(blocks).max() / np.float32(E4M3_MAX * E2M1_MAX), 2**-126))
    inner = blocks / tensor
    block_scale = np.minimum(amax / tensor / np.float32(E2M1_MAX), E4M3_MAX)
    block_scale = block_scale.astype(np.float32).astype(E4M3).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(block_scale > 0, inner / block_scale, 0).astype(np.float32)
    return scaled, blocks.shape[0], cols


def round_e2m1_stochastic(values: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Up to the next E2M1 magnitude with probability (|v| - lower) / (upper - lower)."""
    magnitude = np.abs(values)
    low_index = np.searchsorted(E2M1_GRID, magnitude, side="right") - 1
    low = E2M1_GRID[low_index]
    high = E2M1_GRID[np.minimum(low_index + 1, len(E2M1_GRID) - 1)]
    with np.errstate(invalid="ignore", divide="ignore"):
        p_up = np.where(high > low, (magnitude - low) / (high - low), 0)
    return np.sign(values) * np.where(uniform < p_up, high, low)


def reference_quantize(values, tile, recipe, uniform=None) -> np.ndarray:
    """Dequantized ``values`` (padded to the tile), by the recipe's rule, in numpy."""
    values = np.asarray(values, np.float32)
    rows = math.ceil(values.shape[0] / tile[0]) * tile[0]
    cols = math.ceil(values.shape[1] / tile[1]) * tile[1]
    padded = np.zeros((rows, cols), np.float32)
    padded[: values.shape[0], : values.shape[1]] = values
    out = np.zeros_like(padded)
    tensor_scale = np.float32(1)
    if recipe is NVFP4 and np.abs(values).max() > 0:
        tensor_scale = np.float32(np.abs(values).max() / np.float32(448 * 6))
    for i in range(rows // tile[0]):
        for j in range(cols // tile[1]):
            part = (slice(i * tile[0], (i + 1) * tile[0]), slice(j * tile[1], (j + 1) * tile[1]))
            block = padded[part] / tensor_scale
            amax = float(np.abs(block).max())
            if recipe.scale_rule == "round_up":  # 2^ceil(log2(amax / 448)), the ratio float32
                ratio = float(np.float32(amax) / np.float32(448))
                scale = np.float32(2.0 ** math.ceil(math.log2(ratio))) if amax else 1
                elements = (block / scale).astype(E4M3).astype(np.float32)
            elif recipe.scale_rule == "ocp":  # OCP: 2^(floor(log2 amax) - 8)
                scale = np.float32(2.0 ** (math.frexp(amax)[1] - 1 - 8)) if amax else 1
                elements = np.clip(block / scale, -448, 448).astype(E4M3).astype(np.float32)
            elif recipe is FP8_BLOCK:
                scale = np.float32(amax / np.float32(448)) if amax else np.float32(1)
                elements = (block / scale).astype(E4M3).astype(np.float32)
            else:
                scale = np.float32(np.float32(min(amax / 6, 448)).astype(E4M3))
                scaled = np.clip(block / scale, -6, 6) if scale > 0 else np.zeros_like(block)
                if uniform is None:
                    elements = scaled.astype(E2M1).astype(np.float32)
                else:
                    elements = round_e2m1_stochastic(scaled, uniform[part])
            out[part] = elements.astype(np.float64) * scale * tensor_scale
    return out
