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
"""

from __future__ import annotations

import functools
from fractions import Fraction

from playground.core.dtypes import dtype_facts


def floor_log2(magnitude: Fraction) -> int:
    """floor(log2 magnitude) for magnitude > 0, exactly."""
    exponent = magnitude.numerator.bit_length() - magnitude.denominator.bit_length()
    return exponent - 1 if Fraction(2) ** exponent > magnitude else exponent


@functools.cache
def _limits(dtype: str) -> tuple[int, int, Fraction]:
    """(stored mantissa bits, log2 of the smallest subnormal, max) of ``dtype``."""
    facts = dtype_facts(dtype)
    return facts.mantissa_bits, floor_log2(Fraction(facts.smallest_subnormal)), Fraction(facts.max)


def round_exactly(magnitude: Fraction, dtype: str) -> Fraction | None:
    """``magnitude`` (>= 0) rounded once into ``dtype`` (see the module rule); None on overflow."""
    if magnitude == 0:
        return magnitude
    mantissa_bits, smallest, largest = _limits(dtype)
    spacing = Fraction(2) ** max(floor_log2(magnitude) - mantissa_bits, smallest)
    rounded = round(magnitude / spacing) * spacing  # Fraction's round: half to even
    return rounded if rounded <= largest else None
