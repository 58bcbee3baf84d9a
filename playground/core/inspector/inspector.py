"""The precision inspector: how one typed number is stored in each registered format.

Rule: the typed text is read exactly (``core.inspector.typed_number``) and rounded ONCE into each
format,
straight from that exact value (``core.formats.exact_rounding``: round to nearest, ties to even, the
format's subnormals and largest value), never through a float32 or a float64 first; the rounded
value is then written in the format by numpy / ml_dtypes (exact: the value is one of its own).
An overflow stores what the format's cast makes of +-inf (inf; NaN in float8_e4m3fn, which
has none). Errors are exact (fractions) against the typed value, shown as float64: a finite
number stored as inf has an infinite error, even when float64 itself could not hold it (1e400).

That plain rounding is what ``astype`` does for in-range values; a recipe whose casts saturate
(float8) clips to +-max first instead (``dtypes.saturating_cast``), so each view also carries
that value, and says whether a recipe stores numbers of its dtype that way (``saturates``).
They differ only past a format's largest value: 500 is NaN in a plain float8_e4m3fn cast, 448
when saturated.

The block formats are columns too, each with its own rules (``core.formats.exact_rounding``):
float4_e2m1fn (NVFP4's elements) has no inf and no NaN, so its cast clips 7, 1e39 and inf to
+-6 and turns NaN into a zero (-0 for the usual NaN, as ml_dtypes does); float8_e8m0fnu (MXFP8's
block scales) holds only the powers of two 2^-127 .. 2^127 and NaN, with no sign and no zero: 3
is stored as 4, 1e-60 as 2^-127, and 0, -1 and 1e39 as NaN.

Example::

    >>> bit_view(1e-9, "float8_e4m3fn").category
    'zero'
    >>> bit_view(-2.0, "float32").sign_bit, bit_view(-2.0, "float32").exponent_bits
    ('1', '10000000')
    >>> bit_view("65519.99998", "float16").stored
    65504.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from playground.core.formats.dtypes import FORMATS, cast, computed_here, dtype_facts
from playground.core.formats.exact_rounding import round_exactly
from playground.core.inspector.typed_number import TypedNumber, bits_text, read_number
from playground.core.recipes.registry import saturating_formats

CATEGORIES = ("zero", "subnormal", "normal", "inf", "nan")
# The examples offered in the UI, as typed. Each one shows a single fact about the formats.
PRESETS: tuple[tuple[str, str], ...] = (
    ("1e-9: kept by bfloat16, flushed to zero by float16", "1e-9"),
    ("1.0001: rounds to 1 in bfloat16, not in float32", "1.0001"),
    ("65504: the largest float16", "65504"),
    ("65520: the first value that rounds to inf in float16", "65520"),
    (
        "65519.99998: float16 keeps 65504 (through float32 it would be 65520, then inf)",
        "65519.99998",
    ),
    ("1/3: no binary format holds it exactly", "1/3"),
    ("0.1: not exact in binary either", "0.1"),
    ("1e-6: a float16 subnormal", "1e-6"),
    ("1e39: overflows even float32", "1e39"),
    ("1e400: beyond float64 too", "1e400"),
    ("nan: not a number, in every format", "nan"),
    ("0x3c00:float16: the bits of 1 in float16", "0x3c00:float16"),
    ("500: NaN in a plain float8_e4m3fn cast, 448 saturated (as the float8 step casts)", "500"),
    ("1e-4: flushed to zero in float8_e4m3fn, kept by float8_e5m2", "1e-4"),
    ("7: float4_e2m1fn clips it to 6 (no inf, no NaN)", "7"),
    ("3: float8_e8m0fnu rounds it to 4 (powers of two only)", "3"),
    ("0: NaN in float8_e8m0fnu, which has no zero", "0"),
)


@dataclass(frozen=True)
class BitView:
    """One number as stored in one dtype: its value, its bit fields and its rounding error.

    input is the typed number as a float64 (inf for 1e400); stored the value after rounding
    (may be 0, +-inf or NaN). rounding_error = stored - typed, exactly, shown as float64 (0
    when both are the same infinity, +-inf when a finite number became inf, nan when either is
    nan); relative_error = |rounding_error| / |typed| (0 when the error is 0). gap_to_next is
    the distance from stored to the next value of the dtype toward +inf (inf at the largest
    finite value, nan when stored is not finite). category is one of CATEGORIES.
    computed_here is the stored value after one compiled product on this backend: 0 for a
    subnormal where the backend flushes them. saturated is the value after a saturating cast
    (finite values clipped to +-max first); it equals stored except past the largest finite
    value. saturates: whether a registered recipe casts to this dtype with saturation
    (float8's formats), so that ``saturated`` is what its step stores. raw is the stored bit
    pattern as an unsigned integer of the format's width; sign_bit is empty for a format
    without one.
    """

    dtype: str
    input: float
    stored: float
    sign_bit: str
    exponent_bits: str
    mantissa_bits: str
    rounding_error: float
    relative_error: float
    gap_to_next: float
    category: str
    computed_here: float
    saturated: float
    saturates: bool
    raw: int = 0

    @property
    def bits(self) -> str:
        """The whole bit pattern, sign first."""
        return self.sign_bit + self.exponent_bits + self.mantissa_bits

    def flipped(self, position: int) -> str:
        """The inspector's text for this pattern with bit ``position`` (0 = lowest) flipped."""
        return bits_text(self.raw ^ (1 << position), self.dtype)


def _category(stored: float, dtype: str) -> str:
    if math.isnan(stored):
        return "nan"
    if math.isinf(stored):
        return "inf"
    if stored == 0:
        return "zero"
    return "subnormal" if abs(stored) < dtype_facts(dtype).smallest_normal else "normal"


def _as_float(value: Fraction) -> float:
    """``value`` as the nearest float64, +-inf past its range."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _errors(stored: float, typed: TypedNumber) -> tuple[float, float]:
    """(stored - typed, |stored - typed| / |typed|), exact where both are finite."""
    exact = typed.signed
    if exact is None or not math.isfinite(stored):  # an inf or nan on either side
        if exact is not None and not math.isnan(stored):  # a finite number became +-inf
            return stored, math.inf
        value = typed.float64
        if stored == value:  # the same infinity
            return 0.0, 0.0
        error = stored - value
        return error, abs(error) / abs(value) if not math.isnan(error) else math.nan
    error = Fraction(stored) - exact
    if error == 0:
        return 0.0, 0.0
    return _as_float(error), _as_float(abs(error) / abs(exact))


def _next_up(stored: np.ndarray) -> float:
    """The next value of the stored value's dtype toward +inf (inf past the largest finite one).

    Stepped on the bit pattern: one more for a positive value, one less for a negative one
    (its magnitude shrinks), the smallest subnormal after a zero. Past the largest value the
    next pattern is NaN (float8_e4m3fn) or wraps into the sign bit (float4_e2m1fn: 6 is 0111,
    0111 + 1 is -0): inf either way. numpy's nextafter would do, but ml_dtypes' returns NaN for
    float8_e4m3fn.
    """
    unsigned = np.dtype(f"uint{stored.dtype.itemsize * 8}")
    raw, value = int(stored.view(unsigned)), float(stored)  # floats: 0 is NaN in e8m0
    step = 1 if value > 0 else -1 if value < 0 else 1 - raw  # -0 and +0 both go to raw 1
    following = float(np.asarray(raw + step, unsigned).view(stored.dtype))
    return following if following > value else math.inf  # False for a NaN too


def store(typed: TypedNumber, dtype: str) -> tuple[np.ndarray, bool]:
    """(the 0-d array of ``dtype`` holding ``typed``, whether it overflowed): see the rule."""
    sign = -1.0 if typed.negative else 1.0
    if typed.is_nan:
        return cast(np.float64(math.nan), dtype), False
    if typed.magnitude is None:
        return cast(np.float64(sign * math.inf), dtype), False
    rounded = round_exactly(typed.magnitude, dtype)
    if rounded is None:
        return cast(np.float64(sign * math.inf), dtype), True
    return cast(np.float64(sign * float(rounded)), dtype), False


def bit_view(value: Any, dtype: str) -> BitView:
    """How ``value`` (a number, the inspector's text, or a TypedNumber) is stored in ``dtype``.

    The raw bits come from viewing the stored value as an unsigned integer; they split into
    the sign bit (if the format has one), ``exponent_bits`` and ``mantissa_bits`` as finfo
    states.
    """
    typed = value if isinstance(value, TypedNumber) else read_number(value)
    facts = dtype_facts(dtype)
    stored_array, overflowed = store(typed, dtype)
    stored = float(stored_array)
    container = np.dtype(f"uint{stored_array.dtype.itemsize * 8}")
    raw = int(stored_array.view(container)) & ((1 << facts.bits) - 1)
    bits = format(raw, f"0{facts.bits}b")
    sign_end = facts.bits - facts.exponent_bits - facts.mantissa_bits
    exponent_end = sign_end + facts.exponent_bits
    gap = _next_up(stored_array) - stored if math.isfinite(stored) else math.nan
    error, relative = _errors(stored, typed)
    # A saturating cast clips a finite overflow to the largest value, keeping its sign (NaN for
    # -max in float8_e8m0fnu, which has no sign).
    largest = -facts.max if typed.negative else facts.max
    saturated = float(cast(np.float64(largest), dtype)) if overflowed else stored
    return BitView(
        dtype=dtype,
        input=typed.float64,
        stored=stored,
        sign_bit=bits[:sign_end],
        exponent_bits=bits[sign_end:exponent_end],
        mantissa_bits=bits[exponent_end:],
        rounding_error=error,
        relative_error=relative,
        gap_to_next=gap,
        category=_category(stored, dtype),
        computed_here=computed_here(stored, dtype),
        saturated=saturated,
        saturates=dtype in saturating_formats(),
        raw=raw,
    )


def inspect_number(value: Any) -> tuple[BitView, ...]:
    """``value`` (a number, the inspector's text, or a TypedNumber) as stored in each of FORMATS
    (the step's dtypes, then the block formats), in that order."""
    typed = value if isinstance(value, TypedNumber) else read_number(value)
    return tuple(bit_view(typed, dtype) for dtype in FORMATS)
