"""Round an exact number once into a format: round to nearest, ties to even, from its true value.

Rule: for a magnitude x > 0 and a format with m stored mantissa bits, smallest subnormal 2^s
and largest finite value max (all read from the dtype registry):

    e = floor(log2 x)                       x's binade
    q = 2^max(e - m, s)                     the spacing of the format's values there
    r = round_half_even(x / q) * q          the nearest multiple of q, ties to the even one
    r > max  ->  overflow                   (r is then the next value past max, were there one)

That is IEEE 754's rule: 65519.99998 is 0.00002 below float16's tie at 65520, so it rounds down
to 65504, where a float32 first (65520 exactly) would tie up to 2^16 and overflow. float8_e4m3fn
has no inf and spends its top exponent on numbers: max = 448 has an even mantissa (110), so a
tie at 464 rounds down to it, and anything above overflows. What an overflow becomes is the
format's own cast of +-inf (inf, or NaN in float8_e4m3fn: ml_dtypes' cast from float64 does the
same for every value past the tie); ``round_exactly`` reports it as None.

The block formats follow the same rule, with their own facts. float4_e2m1fn (m = 1, 2^s = 0.5,
max = 6) rounds 0.25 to 0 and 1.25 to 1 (ties to even); past 6 its cast (ml_dtypes') clips to
+-6, as it has no inf and no NaN. float8_e8m0fnu has no mantissa bits (m = 0), no sign and no
zero: its values are 2^-127 .. 2^127 and NaN. With m = 0 a tie (3 = 1.5 x 2) rounds to the upper
power (4: 2 is the even multiple of the spacing), as ml_dtypes' cast does; a positive magnitude
below 2^-127 rounds to 2^-127, its nearest value, since there is no zero to round to; 0,
negative numbers and overflows are NaN (the format's own cast of them).

ml_dtypes' casts from float64 to these two formats pass through float32 (a double rounding):
0.25 + 2^-40 is 0 there (float32 makes it the tie 0.25), 0.5 here; and below 2^-149 (where
float32 gives 0) its float8_e8m0fnu is NaN, here 2^-127.
"""

from __future__ import annotations

import functools
from fractions import Fraction

from playground.core.formats.dtypes import dtype_facts


def floor_log2(magnitude: Fraction) -> int:
    """floor(log2 magnitude) for magnitude > 0, exactly."""
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    return exponent - 1 if Fraction(2) ** exponent > magnitude else exponent


@functools.cache
def _limits(dtype: str) -> tuple[int, Fraction, Fraction, bool]:
    """(stored mantissa bits, the smallest subnormal, max, whether 0 is a value) of ``dtype``."""
    facts = dtype_facts(dtype)
    tiniest = Fraction(facts.smallest_subnormal)
    return facts.mantissa_bits, tiniest, Fraction(facts.max), facts.has_zero


def round_exactly(magnitude: Fraction, dtype: str) -> Fraction | None:
    """``magnitude`` (>= 0) rounded once into ``dtype`` (see the module rule); None on overflow."""
    if magnitude == 0:
        return magnitude
    mantissa_bits, tiniest, largest, has_zero = _limits(dtype)
    spacing = Fraction(2) ** max(floor_log2(magnitude) - mantissa_bits, floor_log2(tiniest))
    rounded = round(magnitude / spacing) * spacing  # Fraction's round: half to even
    if rounded == 0 and not has_zero:  # no zero to round to: the nearest value is the least
        return tiniest
    return rounded if rounded <= largest else None
