"""Tests for core.inspector.inspector (the number inspector): each value's stored bits and
errors in every dtype, checked against the format definitions, against ml_dtypes' casts from
float64 where those are exact (values a float32 holds: ml_dtypes 0.6 casts through float32), and
against a rounding written here by enumerating each format's values.
"""

import bisect
import math
from decimal import Decimal
from fractions import Fraction

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples, format_values
from playground.core.formats.dtypes import DTYPES, FORMATS
from playground.core.inspector.inspector import PRESETS, bit_view, inspect_number
from playground.core.inspector.typed_number import read_number
from reference import FINITE_ONLY, WIDTHS


def _step_views(typed):
    """The views of the step's own formats (the block formats' special rules are tested in
    test_inspector_block_formats.py)."""
    return [view for view in inspect_number(typed) if view.dtype in DTYPES]


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


@pytest.mark.parametrize("typed", [math.inf, "inf", "+inf", "Infinity"])
def test_non_finite_inputs(typed):
    for view in _step_views(typed):
        if view.dtype in FINITE_ONLY:  # no infinity to store: inf becomes NaN
            assert view.category == "nan" and math.isnan(view.saturated)
            continue
        assert view.category == "inf" and view.rounding_error == 0 and view.relative_error == 0
    for nan in (math.nan, "nan", "NaN"):
        for view in _step_views(nan):
            assert view.category == "nan" and math.isnan(view.rounding_error)
            assert math.isnan(view.gap_to_next) and math.isnan(view.relative_error)


def test_minus_inf_is_stored_as_minus_inf_where_a_format_has_one():
    for view in _step_views("-inf"):
        if view.dtype in FINITE_ONLY:
            assert view.category == "nan"
            continue
        assert view.stored == -math.inf and view.sign_bit == "1" and view.rounding_error == 0


def test_inspect_number_covers_every_dtype_in_order():
    views = inspect_number(0.1)
    assert tuple(view.dtype for view in views) == FORMATS
    assert FORMATS[: len(DTYPES)] == DTYPES  # the step's formats first, then the block formats
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


def test_presets_include_the_seed_examples_and_each_one_reads():
    texts = {text for _, text in PRESETS}
    assert {"1e-9", "1.0001", "65504", "65520", "1/3", "0.1", "nan", "1e400"} <= texts
    for label, text in PRESETS:
        assert label.startswith(text) and read_number(text).text == text.lower()


def _same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def _reassemble(view) -> float:
    raw = int(view.sign_bit + view.exponent_bits + view.mantissa_bits, 2)
    bits = len(view.sign_bit + view.exponent_bits + view.mantissa_bits)
    integer = np.asarray(raw, dtype=np.dtype(f"uint{bits}"))
    return float(integer.view(np.dtype(jnp.dtype(view.dtype))))


@settings(deadline=None, max_examples=examples(150))
@given(value=st.floats(allow_nan=False, allow_infinity=False), dtype=st.sampled_from(DTYPES))
def test_bits_reassemble_to_the_stored_value(value, dtype):
    view = bit_view(value, dtype)
    reassembled = _reassemble(view)
    # NaN is a result too: float8_e4m3fn has no inf, so a plain cast past 464 gives NaN.
    assert _same(reassembled, view.stored)
    assert math.copysign(1.0, reassembled) == math.copysign(1.0, view.stored)
    if view.category == "normal":
        # Rounding moves a normal value by at most half a step, and a step is at most eps * |x|.
        assert abs(view.rounding_error) <= 2.0 ** -WIDTHS[dtype][1] * abs(view.stored)


# --- rounding once, from the exact typed value ----------------------------------------------


def _ml_dtype(dtype: str) -> np.dtype:
    return np.dtype(jnp.dtype(dtype))


def _neighbours(dtype: str, magnitude: Fraction) -> tuple[list[Fraction], list[int]]:
    """The format's values around ``magnitude`` (float32: the float32 neighbours of the float64
    nearest to it, which enclose it)."""
    if dtype != "float32":
        pairs = format_values(_ml_dtype(dtype), 8 * _ml_dtype(dtype).itemsize)
        return [value for value, _ in pairs], [raw for _, raw in pairs]
    centre = np.float32(min(float(magnitude), float(np.finfo(np.float32).max)))
    near = {centre, np.nextafter(centre, np.float32(0)), np.nextafter(centre, np.float32(np.inf))}
    near = sorted(v for v in near if np.isfinite(v))
    return [Fraction(float(v)) for v in near], [int(np.float32(v).view(np.uint32)) for v in near]


def _reference(typed: str, dtype: str) -> float:
    """``typed`` rounded to ``dtype`` by the definition: the nearest of its values, a tie to the
    even bit pattern; past its largest value, a virtual next value (one more step) stands for
    overflow, which gives the format's cast of inf (inf, or NaN in float8_e4m3fn)."""
    exact = Fraction(Decimal(typed))
    negative, magnitude = exact < 0, abs(exact)
    values, raws = _neighbours(dtype, magnitude)
    largest = Fraction(float(ml_dtypes.finfo(_ml_dtype(dtype)).max))
    if values[-1] == largest:  # the virtual value past the largest, with the next pattern
        values = [*values, 2 * largest - values[-2]]
        raws = [*raws, raws[-1] + 1]
    at = bisect.bisect_left(values, magnitude)
    candidates = [i for i in (at - 1, at) if 0 <= i < len(values)]
    best = min(candidates, key=lambda i: (abs(values[i] - magnitude), raws[i] % 2))
    if values[best] > largest:
        result = float(np.float64(math.inf).astype(_ml_dtype(dtype)))
    else:
        result = float(values[best])
    return -result if negative else result


def _typed_decimals():
    digits = st.integers(0, 10**7)
    exponents = st.integers(-48, 42)
    signs = st.sampled_from(["", "-"])
    return st.builds(lambda s, d, e: f"{s}{d}e{e}", signs, digits, exponents)


@settings(deadline=None, max_examples=examples(120))
@given(typed=_typed_decimals(), dtype=st.sampled_from(DTYPES))
def test_a_typed_decimal_is_rounded_once_to_the_nearest_value_of_each_format(typed, dtype):
    view = bit_view(typed, dtype)
    assert _same(view.stored, _reference(typed, dtype)), (typed, dtype, view.stored)
    if view.stored == 0:  # a zero keeps the typed sign
        assert math.copysign(1.0, view.stored) == (-1.0 if typed.startswith("-") else 1.0)


@settings(deadline=None, max_examples=examples(120))
@given(value=st.floats(width=32, allow_nan=False), dtype=st.sampled_from(DTYPES))
def test_a_float32_value_is_stored_as_ml_dtypes_casts_it_from_float64(value, dtype):
    # ml_dtypes' cast from float64 goes through float32: exact for these values.
    with np.errstate(over="ignore", invalid="ignore"):
        expected = float(np.float64(value).astype(_ml_dtype(dtype)))
    assert _same(bit_view(value, dtype).stored, expected), (value, dtype)


def test_65519_99998_rounds_straight_to_float16s_largest():
    # float16's rule, written out: its values near the top are 65504 and (were the exponent
    # range one larger) 65536, so the tie is 65520; below it a number rounds down to 65504.
    largest, past = Fraction(65504), Fraction(65536)
    tie = (largest + past) / 2
    typed = Fraction(Decimal("65519.99998"))
    assert typed < tie
    view = bit_view("65519.99998", "float16")
    assert view.stored == float(largest) and view.category == "normal"
    assert view.rounding_error == float(largest - typed)
    # Through float32 first, the same number lands on the tie and overflows: the old path.
    assert float(np.float32(65519.99998)) == float(tie)
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(np.float32(65519.99998)))


def test_float8_e4m3fn_ties_down_to_448_and_overflows_to_nan_past_the_tie():
    # 448 = 1.110b x 2^8 has an even mantissa; the next step (480) is no number in E4M3FN.
    assert bit_view("464", "float8_e4m3fn").stored == 448
    past = bit_view("464.0001", "float8_e4m3fn")
    assert math.isnan(past.stored) and past.saturated == 448
    with np.errstate(invalid="ignore", over="ignore"):
        assert math.isnan(float(np.float64(464.0001).astype(ml_dtypes.float8_e4m3fn)))


def test_beyond_float64_is_an_infinite_error_not_zero():
    typed = read_number("1e400")
    assert typed.beyond_float64 and typed.float64 == math.inf
    for view in _step_views(typed):
        expected = math.nan if view.dtype in FINITE_ONLY else math.inf
        assert _same(view.stored, expected)
        assert view.rounding_error == math.inf or math.isnan(view.stored)
        assert view.relative_error == math.inf or math.isnan(view.stored)
    tiny = _step_views("-1e-400")
    assert all(v.stored == 0 and math.copysign(1.0, v.stored) == -1 for v in tiny)
    assert all(v.relative_error == 1.0 for v in tiny)


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_every_bit_pattern_typed_with_its_format_is_stored_as_itself(dtype):
    for raw in range(256):
        view = bit_view(f"0x{raw:02x}:{dtype}", dtype)
        value = float(np.asarray(raw, np.uint8).view(_ml_dtype(dtype)))
        assert _same(view.stored, value), (raw, view)
        if not math.isnan(value):
            assert view.raw == raw


def test_flipping_a_bit_gives_the_text_of_the_flipped_pattern():
    one = bit_view(1.0, "float16")
    assert one.bits == "0011110000000000" and one.raw == 0x3C00
    lowest = one.flipped(0)
    assert lowest == "0x3c01:float16"
    assert bit_view(lowest, "float16").stored == 1 + 2.0**-10
    assert bit_view(one.flipped(15), "float16").stored == -1.0  # the sign bit
    assert bit_view(one.flipped(14), "float16").stored == math.inf  # exponent 11111: inf
    assert bit_view(one.flipped(13), "float16").stored == 2.0**-8  # exponent 00111
    assert bit_view(bit_view(1.0, "float32").flipped(31), "bfloat16").stored == -1.0


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_decimal_just_past_a_tie_rounds_up_where_float64_would_make_it_the_tie(dtype):
    # 1 + half a step + 1e-40 or so: float64 keeps only 1 + half a step (a tie, which goes to the
    # even 1); rounded once from the typed digits, it is past the tie and goes up.
    step = Fraction(2) ** -WIDTHS[dtype][1]
    typed = str(Decimal(1 + float(step / 2))) + "0" * 30 + "1"  # Decimal(float) is exact
    assert float(Decimal(typed)) == 1 + float(step / 2)
    assert bit_view(typed, dtype).stored == float(1 + step) == _reference(typed, dtype)
