"""Tests for core.inspector.typed_number: the inspector's text read exactly, or refused naming
the field ``number``."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from playground.core.bounds import ConfigError
from playground.core.inspector.typed_number import MAX_LENGTH, bits_text, read_number


@pytest.mark.parametrize(
    ("text", "exact"),
    [
        ("1e-8", Fraction(1, 10**8)),
        ("65519.99998", Fraction(6551999998, 10**5)),
        ("0.1000000000000000000001", Fraction(10**21 + 1, 10**22)),
        ("1/3", Fraction(1, 3)),
        ("-2/7", Fraction(-2, 7)),
        ("0x1p-24", Fraction(1, 2**24)),
        ("-0X1.8p1", Fraction(-3)),
        ("\u22122.5", Fraction(-5, 2)),
        (" 42 ", Fraction(42)),
    ],
)
def test_text_is_read_exactly(text, exact):
    assert read_number(text).signed == exact


def test_specials_and_signed_zero():
    assert math.isnan(read_number("nan").float64) and read_number("nan").is_nan
    assert read_number("inf").float64 == read_number("+inf").float64 == math.inf
    assert read_number("-inf").float64 == -math.inf and read_number("Infinity").magnitude is None
    minus_zero = read_number("-0")
    assert minus_zero.float64 == 0 and math.copysign(1.0, minus_zero.float64) == -1.0


def test_numbers_beyond_or_below_float64_say_so():
    assert read_number("1e400").beyond_float64 and read_number("-1e400").float64 == -math.inf
    assert not read_number("1e308").beyond_float64
    assert read_number("1e-400").below_float64 and not read_number("5e-324").below_float64
    # A huge exponent is never expanded: it is held past every format's range.
    assert read_number("1e999999999").beyond_float64
    assert read_number("0x1p-999999999").below_float64


@pytest.mark.parametrize(
    ("text", "value", "dtype"),
    [
        ("0x3c00:float16", 1.0, "float16"),
        ("0x3F80:bfloat16", 1.0, "bfloat16"),
        ("0x7e:float8_e4m3fn", 448.0, "float8_e4m3fn"),
        ("0x1:float32", float(np.finfo(np.float32).smallest_subnormal), "float32"),
        ("0x8000:float16", -0.0, "float16"),
        ("0x7c00:float16", math.inf, "float16"),
    ],
)
def test_bits_with_a_format_name_read_as_that_formats_value(text, value, dtype):
    typed = read_number(text)
    assert typed.bits_of == dtype and typed.float64 == value
    assert math.copysign(1.0, typed.float64) == math.copysign(1.0, value)
    # The page's own text for a pattern reads back to the same pattern.
    raw = int(text.split(":")[0], 16)
    assert read_number(bits_text(raw, dtype)).float64 == value


def test_nan_bits_read_as_nan():
    assert read_number("0x7f:float8_e4m3fn").is_nan and read_number("0x7e00:float16").is_nan


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("abc", "number must be a real number"),
        ("ff", "number must be a real number"),
        ("", "number must be a real number"),
        ("1e-8x", "number must be a real number"),
        ("--1", "number must be a real number"),
        ("2/-7", "number must be a real number"),
        ("1/0", "number must be a real number"),
        ("0x10000:float16", "at most 16 bits"),
        ("0x1:float64", "one of float32, bfloat16"),
        ("1" * (MAX_LENGTH + 1), "number must be a real number"),
        (None, "number must be a real number"),
        (True, "number must be a real number"),
    ],
)
def test_anything_else_is_refused_naming_the_field(text, words):
    with pytest.raises(ConfigError) as caught:
        read_number(text)
    assert caught.value.field == "number" and words in str(caught.value)


def test_an_integer_beyond_float_range_from_the_api_is_refused():
    with pytest.raises(ConfigError):
        read_number(10**400)
