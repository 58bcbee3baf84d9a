"""A float64 reference for each training recipe's statistics of one tensor (underflow,
overflow, rel_error, mse and the scales' range, as TransformerEngine's debug statistics define
them), written apart from the code under test with numpy and ml_dtypes' casts by the recipes'
published rules; shared by the inspect command's and the tensors tab's tests."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

BF16, E4M3, E5M2, E2M1 = (
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e5m2,
    ml_dtypes.float4_e2m1fn,
)


def _edge(dtype) -> float:
    finfo = ml_dtypes.finfo(dtype)
    top = float(finfo.max)
    return top + 2.0 ** (math.floor(math.log2(top)) - int(finfo.nmant)) / 2


def _cast(values32: np.ndarray, dtype) -> np.ndarray:
    top = float(ml_dtypes.finfo(dtype).max)
    return np.clip(values32, -top, top).astype(dtype).astype(np.float64)


def _tiles(matrix: np.ndarray, tile: tuple[int, int]) -> np.ndarray:
    rows = -(-matrix.shape[0] // tile[0]) * tile[0]
    cols = -(-matrix.shape[1] // tile[1]) * tile[1]
    padded = np.zeros((rows, cols))
    padded[: matrix.shape[0], : matrix.shape[1]] = matrix
    return padded.reshape(rows // tile[0], tile[0], cols // tile[1], tile[1])


def reference(matrix: np.ndarray, recipe: str, gradient: bool) -> dict[str, float | None]:
    """The statistics of one recipe on ``matrix`` (float64, finite) by the published rules."""
    x = np.asarray(matrix, np.float64)
    results = []  # per orientation: (stored, exact, scaled, overflow edge, live blocks' scales)
    if recipe in ("bfloat16", "float16"):
        dtype = BF16 if recipe == "bfloat16" else np.float16
        results.append((_cast(x.astype(np.float32), dtype), x, x, _edge(dtype), [1.0]))
    elif recipe == "float8_current":
        dtype = E5M2 if gradient else E4M3
        amax = np.float32(np.abs(x).max())
        s = np.float32(ml_dtypes.finfo(dtype).max) / amax if amax > 0 else np.float32(1)
        scaled = x.astype(np.float32) * s
        results.append(
            (_cast(scaled, dtype) / np.float64(s), x, scaled, _edge(dtype), [1 / float(s)])
        )
    elif recipe == "mxfp8":
        for tile in ((1, 32), (32, 1)):
            t = _tiles(x, tile)
            amax = np.abs(t).max(axis=(1, 3), keepdims=True)
            ratio = (np.where(amax > 0, amax, 448).astype(np.float32) / np.float32(448)).astype(
                np.float64
            )
            scale = np.exp2(np.ceil(np.log2(ratio)))
            scaled = t / scale
            stored = _cast(scaled.astype(np.float32), E4M3) * scale
            results.append((stored, t, scaled, _edge(E4M3), scale[amax > 0]))
    else:
        fp8 = recipe == "fp8_block"
        size = 128 if fp8 else 16
        tiles = [(1, size), (size, 1)] if gradient else [(size, size)]
        for tile in tiles:
            t = _tiles(x, tile).astype(np.float32)
            amax = np.abs(t).max(axis=(1, 3), keepdims=True)
            if fp8:
                outer, block = (
                    np.float32(1),
                    np.where(amax > 0, amax / np.float32(448), np.float32(1)),
                )
                dtype = E4M3
            else:
                outer = np.float32(max(np.abs(x).max() / np.float32(448 * 6), 2.0**-126))
                block = (
                    np.minimum(amax / outer / np.float32(6), 448).astype(E4M3).astype(np.float32)
                )
                dtype = E2M1
            with np.errstate(divide="ignore", invalid="ignore"):
                scaled = np.where(block > 0, t / outer / block, 0).astype(np.float32)
            stored = _cast(scaled, dtype) * block.astype(np.float64) * np.float64(outer)
            factor = block.astype(np.float64) * np.float64(outer)
            results.append((stored, _tiles(x, tile), scaled, _edge(dtype), factor[amax > 0]))
    worst: dict[str, float | None] = {}
    for stored, exact, scaled, edge, scales in results:
        finite = x.size
        error_sq = float(np.sum((stored - exact) ** 2))
        row = {
            "underflow": np.count_nonzero((exact != 0) & (stored == 0)) / finite,
            "overflow": np.count_nonzero(np.abs(scaled) > edge) / finite,
            "rel_error": math.sqrt(error_sq / float(np.sum(x**2))),
            "mse": error_sq / finite,
            "scale_min": float(np.min(scales)),
            "scale_max": float(np.max(scales)),
        }
        for key, value in row.items():
            if key == "scale_min":
                worst[key] = min(worst.get(key, math.inf), value)
            else:
                worst[key] = max(worst.get(key, -math.inf), value)
    return worst
