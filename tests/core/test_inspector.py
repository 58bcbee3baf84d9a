"""Tests for playground.core.inspector (the number inspector): each value's stored bits and
errors in every dtype, checked against the format definitions and against JAX's own cast.
"""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from playground.core.dtypes import DTYPES
from playground.core.inspector import PRESETS, bit_view, inspect_number
from reference import FINITE_ONLY, WIDTHS


def test_tiny_value_survives_bfloat16_but_not_float16():
    assert bit_view(1e-9, "bfloat16").stored > 0
    assert bit_view(1e-9, "bfloat16").category == "normal"
    flushed = bit_view(1e-9, "float16")
    assert flushed.stored == 0 and flushed.category == "zero"
    assert flushed.rounding_error == -1e-9 and flushed.relative_error == 1.0


def test_small_increment_is_lost_in_bfloat16_only():
    assert bit_view(1 + 1e-4, "bfloat16").stored == 1.0
    assert bit_view(1 + 1e-4, "float32").stored > 1.0


def test_float16_overflow_boundary():
    largest = bit_view(65504, "float16")
    assert largest.stored == 65504 and largest.category == "normal"
    assert largest.gap_to_next == math.inf
    # 65520 is halfway between 65504 and the next power of two; the tie goes to the even
    # neighbour, which is 2**16, past the largest float16.
    overflow = bit_view(65520, "float16")
    assert overflow.stored == math.inf and overflow.category == "inf"
    assert overflow.rounding_error == math.inf and overflow.relative_error == math.inf
    assert overflow.exponent_bits == "1" * 5 and overflow.mantissa_bits == "0" * 10


def test_bit_fields_of_one_and_minus_two():
    one = bit_view(1.0, "float32")
    assert (one.sign_bit, one.exponent_bits, one.mantissa_bits) == ("0", "01111111", "0" * 23)
    minus_two = bit_view(-2.0, "bfloat16")
    assert minus_two.sign_bit == "1"
    assert minus_two.exponent_bits == format(127 + 1, "08b")
    assert minus_two.mantissa_bits == "0" * 7


def test_subnormal_has_zero_exponent_field():
    view = bit_view(1e-6, "float16")
    assert view.category == "subnormal"
    assert view.exponent_bits == "00000"
    # A subnormal is mantissa * smallest_subnormal.
    assert int(view.mantissa_bits, 2) * 2.0**-24 == view.stored


@pytest.mark.parametrize("dtype", DTYPES)
def test_gap_after_one_is_eps(dtype):
    assert bit_view(1.0, dtype).gap_to_next == 2.0 ** -WIDTHS[dtype][1]


def test_non_finite_inputs():
    for view in inspect_number(math.inf):
        if view.dtype in FINITE_ONLY:  # no infinity to store: inf becomes NaN
            assert view.category == "nan" and math.isnan(view.saturated)
            continue
        assert view.category == "inf" and view.rounding_error == 0 and view.relative_error == 0
    for view in inspect_number(math.nan):
        assert view.category == "nan" and math.isnan(view.rounding_error)
        assert math.isnan(view.gap_to_next)


def test_inspect_number_covers_every_dtype_in_order():
    views = inspect_number(0.1)
    assert tuple(view.dtype for view in views) == DTYPES
    assert all(view.input == 0.1 for view in views)
    assert views[0].relative_error < views[2].relative_error < views[1].relative_error


def test_float8_views_of_500_plain_and_saturated():
    views = {view.dtype: view for view in inspect_number(500.0)}
    e4m3, e5m2 = views["float8_e4m3fn"], views["float8_e5m2"]
    assert math.isnan(e4m3.stored) and e4m3.category == "nan" and e4m3.saturated == 448
    # 500 lies between E5M2's 448 and 512 (spacing 64 there); it rounds to 512, in range.
    assert e5m2.stored == e5m2.saturated == 512 and e5m2.gap_to_next == 128  # 512 x 2^-2
    assert (e4m3.exponent_bits, e4m3.mantissa_bits) == ("1111", "111")  # E4M3FN's only NaN
    largest = bit_view(448.0, "float8_e4m3fn")
    assert largest.gap_to_next == math.inf and largest.mantissa_bits == "110"
    assert views["float32"].saturated == 500  # the 16- and 32-bit casts have nothing to clip


def test_presets_include_the_seed_examples():
    values = {value for _, value in PRESETS}
    assert {1e-9, 1 + 1e-4, 65504, 65520, 1 / 3, 0.1} <= values
    assert all(isinstance(label, str) and label for label, _ in PRESETS)


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _reassemble(view) -> float:
    raw = int(view.sign_bit + view.exponent_bits + view.mantissa_bits, 2)
    bits = len(view.sign_bit + view.exponent_bits + view.mantissa_bits)
    integer = np.asarray(raw, dtype=np.dtype(f"uint{bits}"))
    return float(integer.view(np.dtype(jnp.dtype(view.dtype))))


@settings(deadline=None, max_examples=200)
@given(value=st.floats(allow_nan=False, allow_infinity=False), dtype=st.sampled_from(DTYPES))
def test_bits_reassemble_to_the_stored_value(value, dtype):
    view = bit_view(value, dtype)
    reassembled = _reassemble(view)
    # NaN is a result too: float8_e4m3fn has no inf, so a plain cast past 464 gives NaN.
    assert _same(reassembled, view.stored)
    assert math.copysign(1.0, reassembled) == math.copysign(1.0, view.stored)
    # The stored value is what JAX's own cast produces (a Python float enters JAX as float32).
    with np.errstate(over="ignore"):
        expected = float(jnp.asarray(np.float32(value)).astype(dtype))
    assert _same(view.stored, expected)
    if view.category == "normal":
        # Rounding moves a normal value by at most half a step, and a step is at most eps * |x|.
        assert abs(view.rounding_error) <= 2.0 ** -WIDTHS[dtype][1] * abs(view.stored)
