"""The precision inspector: how one number is stored in each registered dtype.

Rule: a number is stored the way the playground stores it: the typed value becomes a float32
first (as ``jnp.asarray`` does with x64 off) and is then cast to the dtype with
round-to-nearest-even by numpy / ml_dtypes, which matches ``jnp.astype`` bit for bit. Errors are
measured in float64 against the value that was typed; every limit comes from the dtype registry.

That plain cast is what ``astype`` does; a recipe whose casts saturate (float8) clips to +-max
first instead (``dtypes.saturating_cast``), so each view also carries that value, and says
whether a recipe stores numbers of its dtype that way (``saturates``). They differ only past a
format's largest value: 500 is NaN in a plain float8_e4m3fn cast, 448 when saturated.

Example::

    >>> bit_view(1e-9, "float8_e4m3fn").category
    'zero'
    >>> bit_view(-2.0, "float32").sign_bit, bit_view(-2.0, "float32").exponent_bits
    ('1', '10000000')
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from playground.core.dtypes import (
    DTYPES,
    DtypeFacts,
    cast,
    computed_here,
    dtype_facts,
    saturating_cast,
)
from playground.core.policy import saturating_formats

CATEGORIES = ("zero", "subnormal", "normal", "inf", "nan")
# The examples offered in the UI. Each one shows a single fact about the formats.
PRESETS: tuple[tuple[str, float], ...] = (
    ("1e-9: kept by bfloat16, flushed to zero by float16", 1e-9),
    ("1 + 1e-4: rounds to 1 in bfloat16, not in float32", 1 + 1e-4),
    ("65504: the largest float16", 65504.0),
    ("65520: the first value that rounds to inf in float16", 65520.0),
    ("1/3: no binary format holds it exactly", 1 / 3),
    ("0.1: not exact in binary either", 0.1),
    ("1e-6: a float16 subnormal", 1e-6),
    ("1e39: overflows even float32", 1e39),
    ("500: NaN in a plain float8_e4m3fn cast, 448 saturated (as the float8 step casts)", 500.0),
    ("1e-4: flushed to zero in float8_e4m3fn, kept by float8_e5m2", 1e-4),
)


@dataclass(frozen=True)
class BitView:
    """One number as stored in one dtype: its value, its three bit fields and its rounding error.

    stored is the value after the cast (may be 0 or +-inf). rounding_error = stored - input in
    float64 (0 when both are the same infinity, nan when input is nan); relative_error =
    |rounding_error| / |input| (0 when the error is 0). gap_to_next is the distance from stored
    to the next value of the dtype toward +inf (inf at the largest finite value, nan when stored
    is not finite). category is one of CATEGORIES. computed_here is the stored value after one
    compiled product on this backend: 0 for a subnormal where the backend flushes them.
    saturated is the value after a saturating cast (finite values clipped to +-max first); it
    equals stored except past the largest finite value. saturates: whether a registered recipe
    casts to this dtype with saturation (float8's formats), so that ``saturated`` is what its
    step stores; where none does, the saturated value is no step's.
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


def _store(value: float, dtype: str) -> np.ndarray:
    """A 0-d array of ``dtype``: the typed value made float32, then cast (the playground's path)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return cast(np.asarray(value, dtype=np.float64).astype(np.float32), dtype)


def _category(stored: float, facts: DtypeFacts) -> str:
    if math.isnan(stored):
        return "nan"
    if math.isinf(stored):
        return "inf"
    if stored == 0:
        return "zero"
    return "subnormal" if abs(stored) < facts.smallest_normal else "normal"


def _errors(stored: float, value: float) -> tuple[float, float]:
    """(stored - value, |stored - value| / |value|), with equal infinities counting as exact."""
    if stored == value:  # also covers 0 and the infinities, where the subtraction would fail
        return 0.0, 0.0
    error = stored - value  # float64: a finite value that became inf has an infinite error
    return error, abs(error) / abs(value)


def _next_up(stored: np.ndarray) -> float:
    """The next value of the stored value's dtype toward +inf (inf past the largest finite one).

    Stepped on the bit pattern: one more for a positive value, one less for a negative one
    (its magnitude shrinks), the smallest subnormal after a zero. numpy's nextafter would do,
    but ml_dtypes' returns NaN for float8_e4m3fn.
    """
    unsigned = np.dtype(f"uint{stored.dtype.itemsize * 8}")
    raw = int(stored.view(unsigned))
    step = 1 if stored > 0 else -1 if stored < 0 else 1 - raw  # -0 and +0 both go to raw 1
    following = float(np.asarray(raw + step, unsigned).view(stored.dtype))
    return math.inf if math.isnan(following) else following


def bit_view(value: float, dtype: str) -> BitView:
    """How ``value`` is stored in ``dtype``: the rounded value, its bits and the rounding error.

    The raw bits come from viewing the stored value as an unsigned integer of the same width;
    they split into 1 sign bit, ``exponent_bits`` and ``mantissa_bits`` as finfo states.
    """
    facts = dtype_facts(dtype)
    value = float(value)
    stored_array = _store(value, dtype)
    stored = float(stored_array)
    raw = int(stored_array.view(np.dtype(f"uint{facts.bits}")))
    bits = format(raw, f"0{facts.bits}b")
    exponent_end = 1 + facts.exponent_bits
    gap = _next_up(stored_array) - stored if math.isfinite(stored) else math.nan
    error, relative = _errors(stored, value)
    with np.errstate(over="ignore"):
        saturated = float(saturating_cast(np.float64(value).astype(np.float32), dtype))
    return BitView(
        dtype=dtype,
        input=value,
        stored=stored,
        sign_bit=bits[0],
        exponent_bits=bits[1:exponent_end],
        mantissa_bits=bits[exponent_end:],
        rounding_error=error,
        relative_error=relative,
        gap_to_next=gap,
        category=_category(stored, facts),
        computed_here=computed_here(value, dtype),
        saturated=saturated,
        saturates=dtype in saturating_formats(),
    )


def inspect_number(value: float) -> tuple[BitView, ...]:
    """``value`` as stored in each of DTYPES, in that order."""
    return tuple(bit_view(value, dtype) for dtype in DTYPES)
