"""float32 values as the shortest decimal text that reads back to exactly the same float32.

Rule: a float32 value is written as the shortest decimal (at most 9 significant digits) that
parses back to exactly that float32 with any correctly rounded parser, through float64 or not
(Python's ``float``, numpy, pandas): positional in [1e-4, 1e9) with a ``.`` (``0.1``,
``100.0``, ``-0.0``), scientific outside it (``1e-05``, ``3.4028235e+38``), and ``inf``,
``-inf``, ``nan`` (``float32_text`` shows it).

Formatting is vectorised numpy: ``fill_float32`` writes a whole column of values into a
(rows, FLOAT_WIDTH) uint8 buffer, ASCII characters where the text has them and NUL bytes
elsewhere (a float's unused digits, say); the CSV writer drops the NULs. Nothing is formatted
one value at a time in Python: about twice as fast as ``"%.9g" % value`` row by row, and with
shorter numbers.
"""

from __future__ import annotations

import numpy as np

_OFFSET = 64  # _TEN[k + _OFFSET] = 10.0**k; float32 digits need k in [-54, 38]
_TEN = 10.0 ** np.arange(-_OFFSET, _OFFSET, dtype=np.float64)


def _shortest_digits(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(digits m, count p, exponent e): m * 10^(e - p + 1) is the shortest decimal for ``x``.

    ``x``: finite positive float32 values. For each p = 1 .. 9, the nearest p-digit decimal is
    accepted when it lies inside the interval of reals that round to x in float32 by a margin
    of 2^-20 of the interval's width; the least accepted p wins. The test runs on the values
    scaled to nine digits before the point, in float64: each operation errs by 2^-53 of the
    value, at most 2^-29 of the interval's width (2^-24 of the value at the least), far inside
    the margin, so the true decimal lies inside the interval too and parses back to x,
    through float64 or directly. Nine digits always do: they err by at most 5e-9 of the
    value, a sixth of the half-width. An integer decimal exactly on the interval's edge
    (values in [2^24, 2^53)) is accepted too when x is even, which round-half-to-even picks.
    The result matches numpy's shortest repr but for edge cases (then one digit longer).
    """
    value = x.astype(np.float64)
    with np.errstate(over="ignore"):
        up = np.nextafter(x, np.float32(np.inf)).astype(np.float64)
    down = np.nextafter(x, np.float32(0)).astype(np.float64)
    up = np.where(np.isinf(up), 2 * value - down, up)  # past the largest float32, as if finite
    low, high = (value + down) / 2, (value + up) / 2
    margin = (high - low) * 2.0**-20
    exponent = np.floor(np.log10(value)).astype(np.int64)
    exponent -= _TEN[exponent + _OFFSET] > value
    exponent += _TEN[exponent + 1 + _OFFSET] <= value
    scale = _TEN[8 - exponent + _OFFSET]  # value * scale is in [1e8, 1e9]
    nine, inner_low, inner_high = value * scale, (low + margin) * scale, (high - margin) * scale
    count = np.full(x.shape, 9, np.int64)
    for p in range(8, 0, -1):  # downwards, so the least accepted p is written last
        unit = 10.0 ** (9 - p)
        decimal = np.rint(nine / unit) * unit
        count[(inner_low < decimal) & (decimal < inner_high)] = p
    edge = np.flatnonzero((value >= 2.0**24) & (value < 2.0**53) & (x.view(np.uint32) % 2 == 0))
    for p in range(8, 0, -1) if edge.size else ():
        unit = _TEN[exponent[edge] - p + 1 + _OFFSET]  # >= 1 where the decimal is an integer
        decimal = np.rint(value[edge] / unit) * unit
        exact = (unit >= 1) & (decimal < 2.0**53)  # an integer that float64 holds
        on_edge = exact & ((decimal == low[edge]) | (decimal == high[edge]))
        count[edge[on_edge & (p < count[edge])]] = p
    digits = np.rint(nine / _TEN[9 - count + _OFFSET]).astype(np.int64)
    carry = digits == 10**count  # rounded up to 10^p: 1 and zeros, one place higher
    digits[carry] //= 10
    return digits, count, exponent + carry


FLOAT_WIDTH = 29
# The float field's columns: sign, the "0.000" of 0.000ddd, nine digits each followed by a
# place for the point, the "0" of "100.0", and the exponent "e-05".
_SIGN, _PREFIX, _DIGIT, _POINT, _TAIL, _EXP = 0, 1, slice(6, 24, 2), slice(7, 24, 2), 24, 25
_NINE = np.arange(9)[:, None]
_ZERO, _DOT, _MINUS, _PLUS, _E = (np.uint8(ord(c)) for c in "0.-+e")


def fill_float32(x: np.ndarray, out: np.ndarray) -> None:
    """Write float32 ``x`` into ``out`` (len(x), FLOAT_WIDTH), as the module docstring says.

    Positional (``0.1``, ``100.0``) for decimal exponents in [-4, 9), scientific (``1e-05``)
    outside; ``-0.0``, ``inf``, ``-inf``, ``nan``. The field is built column by column in a
    transposed buffer, where each column is contiguous, and copied into ``out`` at once.
    """
    special = ~np.isfinite(x) | (x == 0)
    m, p, e = _shortest_digits(np.where(special, np.float32(1), np.abs(x)))
    text = np.zeros((FLOAT_WIDTH, x.size), np.uint8)
    left = (m * 10 ** (9 - p)).astype(np.uint32)  # nine digits, the first p significant
    digits = text[_DIGIT]
    for place in range(8, -1, -1):  # uint32 by a scalar: numpy's fastest integer division
        quotient = left // np.uint32(10)
        digits[place] = left - quotient * np.uint32(10) + _ZERO
        left = quotient
    positional = (e >= -4) & (e < 9)
    whole, fraction, scientific = positional & (e >= 0), positional & (e < 0), ~positional
    text[_SIGN] = (np.signbit(x) & ~np.isnan(x)) * _MINUS
    text[_PREFIX] = fraction * _ZERO
    text[_PREFIX + 1] = fraction * _DOT
    for zero in range(3):  # the zeros between "0." and the digits
        text[_PREFIX + 2 + zero] = (fraction & (e < -1 - zero)) * _ZERO
    # Digits past the p-th are zeros; shown only where they hold the place of units.
    digits *= (p > _NINE) | (whole & (e >= _NINE))
    text[_POINT] = ((whole & (e == _NINE)) | (scientific & (_NINE == 0) & (p > 1))) * _DOT
    text[_TAIL] = (whole & (p <= e + 1)) * _ZERO
    power = np.abs(e).astype(np.uint8)
    text[_EXP] = scientific * _E
    text[_EXP + 1] = scientific * np.where(e < 0, _MINUS, _PLUS)
    text[_EXP + 2] = scientific * (power // 10 + _ZERO)
    text[_EXP + 3] = scientific * (power % 10 + _ZERO)
    if special.any():
        text[:, special] = 0
        text[_SIGN, special] = (np.signbit(x) & ~np.isnan(x))[special] * _MINUS
        for word, where in ((b"nan", np.isnan(x)), (b"inf", np.isinf(x)), (b"0.0", x == 0)):
            text[1:4, where] = np.frombuffer(word, np.uint8)[:, None]
    out[:] = text.T


def float32_text(values: np.ndarray) -> list[str]:
    """The text the CSV files write for float32 ``values`` (flattened), one string each."""
    x = np.asarray(values, np.float32).ravel()
    out = np.zeros((x.size, FLOAT_WIDTH), np.uint8)
    fill_float32(x, out)
    return [bytes(row[row != 0]).decode() for row in out]
