"""The typed-list view of a block recipe against values computed here with ml_dtypes."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from playground.core.recipes.block_formats import MXFP8, MXFP8_OCP, NVFP4
from playground.core.recipes.block_view import MAX_VALUES, block_view

E4M3, E2M1 = ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn


def test_mxfp8_view_of_two_blocks():
    first = [1.0, 3.0, 1000.0, 1e-5, 0.0] + [0.5] * 27
    second = [0.25, 0.5, 0.75]
    view = block_view(first + second, MXFP8)
    assert view["last_block_size"] == 3 and len(view["blocks"]) == 2
    # Round up: scale 2^ceil(log2(amax / 448)): 2^2 for 1000 (1000 / 448 = 2.23), 2^-9 for
    # 0.75 (0.75 / 448 = 2^-9.2).
    assert [b["scale_log2"] for b in view["blocks"]] == [2.0, -9.0]
    for entry, value, scale in zip(
        view["entries"], first + second, [4.0] * 32 + [2.0**-9] * 3, strict=True
    ):
        element = float(np.float32(min(value / scale, 448)).astype(E4M3))
        assert entry["element"] == element and entry["stored"] == element * scale
        assert math.isclose(entry["error"], element * scale - np.float32(value), abs_tol=1e-12)
    classes = [entry["class"] for entry in view["entries"][:5]]
    assert classes == ["kept", "kept", "kept", "flushed", "zero"]  # 1e-5 / 4 < 2^-10: flushed
    ocp = block_view(first + second, MXFP8_OCP)  # scale 2^(9 - 8): 1000 / 2 = 500 > 464
    assert ocp["blocks"][0]["scale_log2"] == 1.0 and ocp["entries"][2]["class"] == "saturated"


def test_nvfp4_view_has_two_levels():
    values = [6.0, 3.0, 0.1, -2.0, 0.7]
    view = block_view(values, NVFP4)
    tensor_scale = np.float32(6.0 / np.float32(448 * 6))
    assert math.isclose(view["tensor_scale"], tensor_scale, rel_tol=1e-7)
    block_scale = float(np.float32(6.0 / tensor_scale / 6).astype(E4M3))
    assert view["blocks"][0]["scale"] == block_scale
    for entry, value in zip(view["entries"], values, strict=True):
        scaled = np.float32(np.float32(value) / tensor_scale) / np.float32(block_scale)
        assert entry["element"] == float(np.float32(scaled).astype(E2M1))
    assert [e["class"] for e in view["entries"]] == ["kept", "kept", "flushed", "kept", "kept"]


def test_view_refuses_empty_and_long_lists():
    with pytest.raises(ValueError, match="values must hold 1 to"):
        block_view([], MXFP8)
    with pytest.raises(ValueError, match="values must hold 1 to"):
        block_view([1.0] * (MAX_VALUES + 1), MXFP8)
