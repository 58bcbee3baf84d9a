"""The inspector's block-format columns (float4_e2m1fn, float8_e8m0fnu), against ml_dtypes' casts
where those are exact (from float32) and against a nearest-value search over each format's
values, enumerated here from its bit patterns: E2M1 ties to the even pattern; E8M0 (powers of two,
no zero, no sign) ties up to the larger power, and rounds a positive value below 2^-127 to it."""

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples, format_values
from playground.core.inspector.inspector import PRESETS, bit_view, inspect_number
from playground.core.inspector.typed_number import read_number

E2M1, E8M0 = "float4_e2m1fn", "float8_e8m0fnu"
PEERS = {E2M1: ml_dtypes.float4_e2m1fn, E8M0: ml_dtypes.float8_e8m0fnu}
WIDTH = {E2M1: 4, E8M0: 8}


def _nearest(magnitude: Fraction, dtype: str) -> float:
    """The value a one-time rounding of ``magnitude`` (>= 0) gives, searched over the values."""
    values = format_values(PEERS[dtype], WIDTH[dtype])
    largest = values[-1][0]
    if dtype == E2M1 and magnitude > largest:
        return float(largest)  # no inf, no NaN: the peer's cast clips
    if dtype == E8M0 and magnitude >= largest * Fraction(3, 2):  # past the tie with 2^128
        return math.nan
    if dtype == E8M0 and magnitude == 0:
        return math.nan
    best = min(values, key=lambda v: (abs(v[0] - magnitude), _tie_rank(v, dtype)))
    return float(best[0])


def _tie_rank(value: tuple[Fraction, int], dtype: str) -> tuple:
    return (value[1] % 2,) if dtype == E2M1 else (-value[0],)


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


@settings(max_examples=examples(300), deadline=None)
@given(value=st.floats(width=32, allow_nan=False), dtype=st.sampled_from([E2M1, E8M0]))
def test_a_float32_is_stored_as_ml_dtypes_casts_it(value, dtype):
    # A float32 is exact in the cast's own path, so the peer rounds it once, as the inspector.
    with np.errstate(over="ignore", invalid="ignore"):
        peer = np.asarray(value, np.float32).astype(PEERS[dtype])
    view = bit_view(float(value), dtype)
    assert _same(view.stored, float(peer)), (value, dtype, view.stored, float(peer))
    if not math.isnan(view.stored):
        assert view.raw == int(peer.view(np.uint8)) & (2 ** WIDTH[dtype] - 1)


@settings(max_examples=examples(200), deadline=None)
@given(
    numerator=st.integers(1, 10**12),
    power=st.integers(-160, 140),
    dtype=st.sampled_from([E2M1, E8M0]),
)
def test_a_typed_fraction_rounds_once_to_the_nearest_value(numerator, power, dtype):
    magnitude = Fraction(numerator, 10**6) * Fraction(2) ** power
    text = f"{magnitude.numerator}/{magnitude.denominator}"
    assert _same(bit_view(text, dtype).stored, _nearest(magnitude, dtype))


@pytest.mark.parametrize(
    ("text", "dtype", "expected"),
    [
        ("0.25", E2M1, 0.0),
        ("1.25", E2M1, 1.0),
        ("1.75", E2M1, 2.0),
        ("5", E2M1, 4.0),
        ("3", E8M0, 4.0),
        ("1.5", E8M0, 2.0),
        ("6", E8M0, 8.0),
        ("0.375", E8M0, 0.5),
    ],
)
def test_ties(text, dtype, expected):
    assert bit_view(text, dtype).stored == expected == _nearest(read_number(text).magnitude, dtype)


def test_where_ml_dtypes_float64_cast_rounds_twice_the_inspector_rounds_once():
    cases = [
        (Fraction(1, 4) + Fraction(1, 2**40), E2M1),  # float32 first makes it the tie 0.25
        (Fraction(3, 2) - Fraction(1, 2**30), E8M0),  # float32 first makes it the tie 1.5
        (Fraction(1, 10**60), E8M0),  # float32 first makes it 0, which E8M0 holds as NaN
    ]
    for magnitude, dtype in cases:
        through_float32 = float(np.asarray(float(magnitude)).astype(PEERS[dtype]))
        once = _nearest(magnitude, dtype)
        assert not _same(through_float32, once)
        view = bit_view(f"{magnitude.numerator}/{magnitude.denominator}", dtype)
        assert _same(view.stored, once)


def test_e2m1_has_no_inf_and_no_nan():
    for text in ("7", "1e39", "inf", "1e400"):
        assert bit_view(text, E2M1).stored == 6.0 and bit_view("-" + text, E2M1).stored == -6.0
    peer = float(np.asarray(np.nan, np.float32).astype(ml_dtypes.float4_e2m1fn))
    nan = bit_view("nan", E2M1)
    assert nan.stored == 0 and nan.category == "zero" and _same(nan.stored, peer)
    assert math.copysign(1.0, nan.stored) == math.copysign(1.0, peer)
    assert math.isnan(nan.rounding_error)


def test_e8m0_has_no_zero_no_sign_and_a_nan():
    for text in ("0", "-0", "-1", "-1e-60", "1e39", "inf", "nan"):
        view = bit_view(text, E8M0)
        assert math.isnan(view.stored) and view.category == "nan", text
        assert view.bits == "11111111"  # its only NaN
    smallest = bit_view("1e-60", E8M0)
    assert smallest.stored == 2.0**-127 and smallest.bits == "00000000"
    assert smallest.sign_bit == "" and len(smallest.exponent_bits) == 8
    assert smallest.mantissa_bits == ""


@pytest.mark.parametrize("dtype", [E2M1, E8M0])
def test_gap_to_next_is_the_distance_to_the_next_value(dtype):
    values = [float(v) for v, _ in format_values(PEERS[dtype], WIDTH[dtype])]
    following = values[1:] + [math.inf]
    for value, after in zip(values, following, strict=True):
        assert bit_view(value, dtype).gap_to_next == after - value, value
    if dtype == E2M1:  # the negative side steps toward zero
        assert bit_view(-6.0, dtype).gap_to_next == 2.0
        assert bit_view(-0.5, dtype).gap_to_next == 0.5


def test_a_flipped_e2m1_bit_reads_back_as_its_pattern():
    six = bit_view("6", E2M1)
    assert six.bits == "0111"
    flipped = six.flipped(3)  # the sign bit
    assert flipped == "0xf:float4_e2m1fn"
    assert bit_view(flipped, E2M1).stored == -6.0
    assert bit_view(six.flipped(0), E2M1).stored == 4.0  # 0110


def test_the_inspector_lists_both_block_formats_after_the_step_formats():
    names = [view.dtype for view in inspect_number("1")]
    assert names[-2:] == [E2M1, E8M0]


def test_the_block_format_presets_say_what_ml_dtypes_stores():
    presets = {text: label for label, text in PRESETS}

    def peer(value, dtype):
        with np.errstate(over="ignore", invalid="ignore"):
            return float(np.asarray(value, np.float32).astype(PEERS[dtype]))

    assert f"{E2M1} clips it to {peer(7, E2M1):g}" in presets["7"]
    assert f"{E8M0} rounds it to {peer(3, E8M0):g}" in presets["3"]
    assert math.isnan(peer(0, E8M0)) and f"NaN in {E8M0}" in presets["0"]
    for text in ("7", "3", "0"):
        stored = {view.dtype: view.stored for view in inspect_number(text)}
        assert _same(stored[E2M1], peer(float(text), E2M1))
        assert _same(stored[E8M0], peer(float(text), E8M0))
