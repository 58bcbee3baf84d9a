"""Tests for core.formats.dtypes: every expectation comes from the format definitions or JAX.

The published bit widths (``reference.WIDTHS``: IEEE 754 binary32 and binary16, Google's
bfloat16, the OCP FP8 formats) are the only facts typed in; the limits are derived from them,
not from the module's arithmetic.
"""

import math

import numpy as np
import pytest

from playground.core.formats.dtypes import (
    CLASSES,
    DTYPES,
    classify,
    dtype_facts,
    log2_magnitude_bands,
)
from reference import FINITE_ONLY, WIDTHS


def format_limits(dtype: str) -> dict[str, float]:
    """The limits of a binary format, derived from its exponent and mantissa widths alone."""
    exponent, mantissa = WIDTHS[dtype]
    bias = 2 ** (exponent - 1) - 1
    if dtype in FINITE_ONLY:
        largest_exponent, largest_mantissa = (2**exponent - 1) - bias, 2 - 2 * 2.0**-mantissa
    else:  # IEEE: the all-ones exponent is reserved for inf and nan
        largest_exponent, largest_mantissa = (2**exponent - 2) - bias, 2 - 2.0**-mantissa
    return {
        "bits": 1 + exponent + mantissa,
        "max": largest_mantissa * 2.0**largest_exponent,
        "smallest_normal": 2.0 ** (1 - bias),
        "smallest_subnormal": 2.0 ** (1 - bias - mantissa),
        "eps": 2.0**-mantissa,
    }


@pytest.mark.parametrize("dtype", DTYPES)
def test_facts_match_the_format_definition(dtype):
    facts = dtype_facts(dtype)
    limits = format_limits(dtype)
    assert (facts.exponent_bits, facts.mantissa_bits) == WIDTHS[dtype]
    assert facts.bits == limits["bits"]
    assert facts.max == limits["max"]
    assert facts.smallest_normal == limits["smallest_normal"]
    assert facts.smallest_subnormal == limits["smallest_subnormal"]
    assert facts.eps == limits["eps"]
    assert facts.decimal_digits == pytest.approx(math.log10(2.0 ** (WIDTHS[dtype][1] + 1)))
    assert facts.has_inf == (dtype not in FINITE_ONLY)


def test_known_limits_spelled_out():
    assert dtype_facts("float16").max == (2 - 2**-10) * 2**15 == 65504
    assert dtype_facts("bfloat16").smallest_subnormal == 2.0 ** (-126 - 7)
    assert dtype_facts("float32").max == float(np.finfo(np.float32).max)


def test_unknown_dtype_is_refused():
    with pytest.raises(ValueError, match="float64"):
        dtype_facts("float64")


def test_classify_float16():
    values = np.array([0, 1e-9, 1e-6, 1.0, 7e4, np.inf], dtype=np.float32)
    counts = classify(values, "float16")
    assert counts == {name: 1 for name in CLASSES}
    assert sum(counts.values()) == values.size


def test_classify_bfloat16_keeps_what_float16_loses():
    values = np.array([0, 1e-9, 1e-6, 1.0, 7e4, np.inf, -np.inf, np.nan], dtype=np.float32)
    counts = classify(values, "bfloat16")
    assert counts == {
        "zero": 1,
        "flushed": 0,
        "subnormal": 0,
        "normal": 4,
        "overflow": 0,
        "nonfinite": 3,
    }


def test_classify_boundaries_follow_round_to_nearest_even():
    half_subnormal = np.float32(2.0**-25)  # exactly half of float16's smallest subnormal
    above_half = np.nextafter(half_subnormal, np.float32(1))
    below_overflow = np.nextafter(np.float32(65520), np.float32(0))
    values = np.array(
        [half_subnormal, -above_half, np.float32(65520), -below_overflow], dtype=np.float32
    )
    counts = classify(values, "float16")
    assert counts["flushed"] == 1  # the tie rounds to the even neighbour, zero
    assert counts["subnormal"] == 1
    assert counts["overflow"] == 1
    assert counts["normal"] == 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_log2_bands(dtype):
    limits = format_limits(dtype)
    exponent, mantissa = WIDTHS[dtype]
    bias = 2 ** (exponent - 1) - 1
    bands = log2_magnitude_bands(dtype)
    # At or below half the smallest subnormal a value rounds to zero (ties to even).
    assert bands["rounds_to_zero"] == (1 - bias - mantissa) - 1
    assert bands["smallest_normal"] == 1 - bias
    assert bands["max"] == pytest.approx(math.log2(limits["max"]))
    assert bands["rounds_to_zero"] < bands["smallest_normal"] < bands["max"]
