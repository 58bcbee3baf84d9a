"""A number as the inspector reads it: the exact value of what was typed, never a float first.

Rule: the text is read exactly (Python's Decimal and Fraction), so every format can round the
typed value once, straight from it:

    decimal      1e-8, 65519.99998, 1e400      every digit kept, even past float64's 17
    fraction     1/3, -2/7                     two decimals; the quotient is exact
    hex float    0x1p-24, -0x1.8p1             hex digits and a binary exponent
    specials     nan, inf, +inf, -inf          (infinity too; a minus sign before nan is kept)
    bits         0x3c00:float16                a format's bit pattern in hex, then ':' and the
                                               format's name; at most its width (leading zeros
                                               may be left out). Its value is the format's own.

A bare ``0x3c00`` stays the hex float 15360, as it always was; bits need their format's name,
so a 16-bit pattern is never guessed to be float16 or bfloat16. A JSON number from the API is
the float64 it carries. The value is kept as a sign and an exact magnitude (so -0 keeps its
sign); a magnitude more than LIMIT_BINADES binades away from 1 is held at 2^+-LIMIT_BINADES,
which lies beyond float64 and so beyond every format: each rounds it as it would the typed one.

Example::

    >>> typed = read_number("65519.99998")
    >>> typed.float64, typed.beyond_float64
    (65519.99998, False)
    >>> read_number("1e400").beyond_float64
    True
    >>> float(read_number("0x3c00:float16").magnitude)
    1.0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

import numpy as np

from playground.core.bounds import ConfigError, shown
from playground.core.formats.dtypes import FORMATS, dtype_facts, numpy_dtype

# 2^1100 is past float64's largest value (just under 2^1024) and 2^-1100 below half its
# smallest subnormal (2^-1075): every format overflows or rounds to zero there.
LIMIT_BINADES = 1100
# Decimal exponents whose numbers are surely beyond those binades (10^340 > 2^1100 > 10^331).
_DECIMAL_LIMIT = 340
MAX_LENGTH = 200  # characters: a longer text is refused before it is read
SYNTAX = (
    "a decimal (1e-8), a fraction (1/3), a hexadecimal float (0x1p-24), nan, inf, -inf, "
    "or a format's bits with its name (0x3c00:float16)"
)
_HEX_FLOAT = re.compile(r"0x([0-9a-f]*)(?:\.([0-9a-f]*))?(?:p([+-]?\d{1,9}))?")
_BITS = re.compile(r"0x([0-9a-f]+):([a-z0-9_]+)")
_SPECIALS = {"nan": None, "inf": math.inf, "infinity": math.inf}


@dataclass(frozen=True)
class TypedNumber:
    """A typed number: its text, its sign and exact magnitude (None for inf and nan).

    bits_of names the format whose bit pattern was typed (None for a number).
    """

    text: str
    negative: bool
    magnitude: Fraction | None
    is_nan: bool = False
    bits_of: str | None = None

    @property
    def signed(self) -> Fraction | None:
        """The exact value with its sign (None for inf and nan; -0 reads as 0)."""
        if self.magnitude is None:
            return None
        return -self.magnitude if self.negative else self.magnitude

    @property
    def float64(self) -> float:
        """The nearest float64 (round to nearest even): +-inf beyond its range, +-0 below."""
        if self.is_nan:
            return math.nan
        if self.magnitude is None:
            value = math.inf
        else:
            try:
                value = float(self.magnitude)  # int / int: correctly rounded
            except OverflowError:
                value = math.inf
        return -value if self.negative else value

    @property
    def beyond_float64(self) -> bool:
        """Finite, yet too large for float64: it would be stored there as +-inf."""
        return self.magnitude is not None and math.isinf(self.float64)

    @property
    def below_float64(self) -> bool:
        """Nonzero, yet so small that float64 rounds it to zero."""
        return bool(self.magnitude) and self.float64 == 0


def _held(magnitude: Fraction) -> Fraction:
    """``magnitude``, or 2^+-LIMIT_BINADES when it lies further out (see the module rule)."""
    if magnitude == 0:
        return magnitude
    binades = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    if binades > LIMIT_BINADES:
        return Fraction(2) ** LIMIT_BINADES
    if binades < -LIMIT_BINADES:
        return Fraction(2) ** -LIMIT_BINADES
    return magnitude


def _decimal(text: str) -> Fraction | None:
    """The exact magnitude of a finite decimal, or None when ``text`` is none."""
    if text[:1] in "+-":  # the sign was read before: a second one is no number
        return None
    try:
        number = Decimal(text)
    except InvalidOperation:
        return None
    if not number.is_finite():
        return None
    number = number.copy_abs()  # abs() would round to the context's 28 digits
    if number and number.adjusted() > _DECIMAL_LIMIT:
        return Fraction(2) ** LIMIT_BINADES
    if number and number.adjusted() < -_DECIMAL_LIMIT:
        return Fraction(2) ** -LIMIT_BINADES
    return Fraction(number)


def _hex_float(digits: str, fraction: str | None, exponent: str | None) -> Fraction | None:
    if not digits and not fraction:
        return None
    mantissa = int(digits + (fraction or ""), 16) if digits + (fraction or "") else 0
    power = int(exponent or 0) - 4 * len(fraction or "")
    if mantissa == 0:
        return Fraction(0)
    binades = mantissa.bit_length() + power
    if abs(binades) > LIMIT_BINADES:  # never build 2^(a billion)
        return Fraction(2) ** (LIMIT_BINADES if binades > 0 else -LIMIT_BINADES)
    return Fraction(mantissa) * Fraction(2) ** power


def bits_text(raw: int, dtype: str) -> str:
    """A format's bit pattern as the inspector reads it: ``0x3c00:float16`` (hex digits for
    the whole width, zero-padded)."""
    width = dtype_facts(dtype).bits
    return f"0x{raw:0{-(-width // 4)}x}:{dtype}"


def _bits(raw_text: str, dtype: str, text: str) -> TypedNumber:
    if dtype not in FORMATS:
        raise ConfigError(
            "number", f"number's bits need a format: one of {', '.join(FORMATS)}; got {dtype!r}"
        )
    raw, width = int(raw_text, 16), dtype_facts(dtype).bits
    if raw >= 2**width:
        raise ConfigError(
            "number",
            f"number's bits for {dtype} are at most {width} bits (0x{2**width - 1:x}); "
            f"got {shown(text)}",
        )
    container = np.dtype(f"uint{numpy_dtype(dtype).itemsize * 8}")
    value = float(np.asarray(raw, container).view(numpy_dtype(dtype)))
    negative = math.copysign(1.0, value) < 0
    if math.isnan(value):
        return TypedNumber(text, negative, None, is_nan=True, bits_of=dtype)
    magnitude = None if math.isinf(value) else Fraction(abs(value))
    return TypedNumber(text, negative, magnitude, bits_of=dtype)


def _refuse(text: Any) -> ConfigError:
    # The message keeps the API's opening words ("number must be a real number").
    return ConfigError("number", f"number must be a real number: {SYNTAX}; got {shown(text)}")


def read_number(text: Any) -> TypedNumber:
    """``text`` read as the module rule says; ConfigError naming ``number`` for anything else.

    A float (or an int within float range) from the API is taken as the float64 it is.
    """
    if isinstance(text, bool) or text is None:
        raise _refuse(text)
    if isinstance(text, (int, float)):
        try:
            value = float(text)
        except OverflowError:  # an int beyond float range, which JSON can carry
            raise _refuse(text) from None
        if math.isnan(value):
            return TypedNumber(repr(value), False, None, is_nan=True)
        magnitude = None if math.isinf(value) else Fraction(abs(value))
        return TypedNumber(repr(value), math.copysign(1.0, value) < 0, magnitude)
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        raise _refuse(text)
    cleaned = text.strip().replace("\u2212", "-").replace(" ", "").lower()
    bits = _BITS.fullmatch(cleaned)
    if bits:
        return _bits(bits.group(1), bits.group(2), cleaned)
    sign = cleaned[:1] if cleaned[:1] in "+-" else ""
    unsigned, negative = cleaned[len(sign) :], sign == "-"
    if unsigned in _SPECIALS:
        return TypedNumber(cleaned, negative, None, is_nan=unsigned == "nan")
    hex_float = _HEX_FLOAT.fullmatch(unsigned)
    if hex_float:
        magnitude = _hex_float(*hex_float.groups())
    elif unsigned.count("/") == 1:
        top, bottom = (_decimal(part) for part in unsigned.split("/"))
        magnitude = _held(top / bottom) if top is not None and bottom else None
    else:
        magnitude = _decimal(unsigned)
    if magnitude is None:
        raise _refuse(text)
    return TypedNumber(cleaned, negative, magnitude)
