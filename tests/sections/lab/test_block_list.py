"""The inspector's list view: a typed list as MXFP8 and NVFP4 store it, checked against a numpy
and ml_dtypes reference written here (MXFP8: one power-of-two scale 2^ceil(log2(amax / 448)) per
32 values, E4M3 elements; NVFP4: each stored value is an E2M1 value, nearest to the typed one in
the block's scaled units, times the scales the view states)."""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from playground.sections.lab.block_list import DEFAULT_LIST, block_list_view, read_list

E2M1 = sorted({abs(float(v)) for v in np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn)})


def _rows(html: str) -> list[list[str]]:
    return [re.findall(r"<t[dh]>(.*?)</t[dh]>", row) for row in re.findall(r"<tr>.*?</tr>", html)]


def _line(html: str, recipe: str) -> str:
    return re.search(rf"<p><strong>{recipe}</strong>(.*?)</p>", html).group(1)


def _mxfp8(values: list[float]) -> list[float]:
    """MXFP8 of one list (blocks of 32), in float64 with ml_dtypes' E4M3. A float32 subnormal
    is 0 here: XLA on CPU flushes it, as the page says of float32 (a normal value's stored
    value is never subnormal: 2^-126 is on every block's grid that reaches it)."""
    stored = []
    for start in range(0, len(values), 32):
        block = np.asarray(values[start : start + 32], np.float32)
        block = np.where(np.abs(block) < np.finfo(np.float32).tiny, block * 0, block)  # signed
        amax = float(np.max(np.abs(block)))
        exponent = math.ceil(math.log2(amax / 448)) if amax else -127
        scale = 2.0 ** max(exponent, -127)
        elements = (block / np.float32(scale)).astype(ml_dtypes.float8_e4m3fn)
        stored += list(elements.astype(np.float64) * scale)
    return stored


@settings(max_examples=examples(25), deadline=None)
@given(
    st.lists(
        st.floats(-1e4, 1e4, allow_nan=False).map(lambda v: float(np.float32(v))),
        min_size=1,
        max_size=40,
    )
)
def test_mxfp8_stored_values_match_the_reference(values):
    html = block_list_view(", ".join(repr(v) for v in values))
    rows = _rows(html)
    assert rows[0] == ["#", "typed", "mxfp8 stored", "mxfp8 class", "nvfp4 stored", "nvfp4 class"]
    expected = _mxfp8(values)
    # Each stored value is exact in float64 here and on the page: the same six digits.
    for row, value in zip(rows[1:], expected, strict=True):
        assert row[2] == f"{value:.6g}", (values, row)


def test_the_default_list_states_its_scales_and_nvfp4_values_are_e2m1_values_times_them():
    html = block_list_view(DEFAULT_LIST)
    values = read_list(DEFAULT_LIST)
    amax = max(abs(v) for v in values)
    exponent = math.ceil(math.log2(amax / 448))
    assert f"block scales 2^{exponent};" in _line(html, "mxfp8")
    nvfp4 = _line(html, "nvfp4")
    block_scale = float(re.search(r"block scales ([0-9.e+-]+);", nvfp4).group(1))
    tensor_scale = float(re.search(r"tensor scale ([0-9.e+-]+) ", nvfp4).group(1))
    assert f"the last block holds {len(values)} of 16" in nvfp4
    unit = block_scale * tensor_scale
    for row, value in zip(_rows(html)[1:], values, strict=True):
        scaled = abs(value) / unit
        nearest = min(E2M1, key=lambda e: abs(e - min(scaled, 6.0)))
        assert float(row[4]) == pytest.approx(math.copysign(nearest, value) * unit, rel=1e-5)
        assert row[5] == ("flushed" if nearest == 0 else "kept")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "numbers must hold 1 to 256 numbers; got 0"),
        ("1, abc", "item 2 is no number"),
        (", ".join(["1"] * 257), "got 257"),
    ],
)
def test_a_list_it_cannot_read_is_refused_naming_the_field(text, message):
    html = block_list_view(text)
    assert html.startswith("<p><strong>Invalid numbers</strong>") and message in html
    assert "<table" not in html
