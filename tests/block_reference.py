"""numpy references for the block-scaling panel's numbers, written apart from the code under
test: MXFP8 and per-tensor float8 (E4M3, current scaling) quantization with ml_dtypes' E4M3,
and the relative error of a product in float64."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = float(ml_dtypes.finfo(E4M3).max)  # 448


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
