"""Whether a figure as a text writes it states a computed value to its digits, and no further.

Rule (the tests' own, written with ``decimal`` rather than Python's float formatting): a figure
with significant digits d_1 ... d_k and one unit u in its last place states ``value`` when
every value within value x (1 -+ spread) lies within u / 2 of it. ``spread`` is how far the
value moves from one XLA CPU variation to another (``bench/figure_stability.py``): a loss that
stopped moving a few parts in 10^4 (NOISE_SPREAD, with room), any other a few float32 ulps.
"""

from __future__ import annotations

import decimal
import re

import numpy as np

# A loss that stopped moving (float32 at its noise floor, float16 stalled) and a ratio to one:
# measured up to 3.7e-4 apart across the variations; any other figure: float32 rounding.
NOISE_SPREAD = 1e-3
ROUNDING_SPREAD = 1e-6
# "about 7.4e-08", "1.315", "3.2e+04": a number as the captions write one.
FIGURE = r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?"


def significant_digits(figure: str) -> int:
    return len(decimal.Decimal(figure).as_tuple().digits)


def states(figure: str, value: float, spread: float) -> bool:
    """Whether ``figure`` states ``value`` to its digits under a relative ``spread``."""
    stated = decimal.Decimal(figure)
    half_unit = float(decimal.Decimal(1).scaleb(stated.as_tuple().exponent)) / 2
    return all(abs(value * (1 + sign * spread) - float(stated)) <= half_unit for sign in (-1, 0, 1))


def about(text: str, before: str) -> str:
    """The figure written after ``before`` + "about " in ``text`` (the first such)."""
    match = re.search(re.escape(before) + r"about (" + FIGURE + ")", text)
    assert match, f"no 'about <figure>' after {before!r} in: {text}"
    return match.group(1)


def stopped(curve) -> bool:
    """The loss moved by less than 1% of its final value over the run's last tenth (at least
    one step): at a noise floor or stalled."""
    tail = np.asarray(curve, np.float64)[-(max(len(curve) // 10, 1) + 1) :]
    return bool(np.isfinite(tail).all() and np.ptp(tail) < 0.01 * abs(tail[-1]))


def states_loss(said_about: bool, figure: str, value: float, at_floor: bool) -> bool:
    """A loss (or a ratio with one) that stopped moving is written "about" + 2 significant
    digits that hold across NOISE_SPREAD; any other to at most 4 that hold across rounding."""
    if said_about != at_floor:
        return False
    if at_floor:
        return significant_digits(figure) == 2 and states(figure, value, NOISE_SPREAD)
    return significant_digits(figure) <= 4 and states(figure, value, ROUNDING_SPREAD)
