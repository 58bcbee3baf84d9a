"""Numbers as the page and the JSON show them, written once for every section.

Rule: a JSON value is a finite number or, for a value JSON cannot hold, one of the documented
strings "inf", "-inf" and "nan"; agreement between two losses is counted in significant decimal
digits, never beyond what float32 resolves; a factor (one number over another) is written one
way everywhere, as ``factor_text`` writes it: 4 significant digits, then " x" (2 x, 1.565e+11 x),
never with thousands separators nor glued to the x.
"""

from __future__ import annotations

import math

import jax.numpy as jnp
import numpy as np

# float32 resolves about 7.2 decimal digits; agreement is never claimed beyond that.
FLOAT32_DIGITS = -math.log10(float(jnp.finfo(jnp.float32).eps) / 2)


def json_number(value: float) -> float | int | str:
    """A float for JSON: finite values unchanged, others as "inf", "-inf" or "nan"."""
    if isinstance(value, (int, np.integer)):
        return int(value)
    return float(value) if math.isfinite(value) else str(float(value))


def agreeing_digits(value: float, reference: float) -> float:
    """Significant decimal digits on which ``value`` agrees with ``reference``.

    -log10(|value - reference| / |reference|), clipped to [0, float32's ~7.2 digits]; the
    float32 limit when they are equal (the same infinity included); 0 when they differ and
    either is not finite, and for NaN, which equals nothing.
    """
    if value == reference:
        return FLOAT32_DIGITS
    if not (math.isfinite(value) and math.isfinite(reference)):
        return 0.0
    scale = abs(reference) if reference != 0 else abs(value)
    return float(min(max(-math.log10(abs(value - reference) / scale), 0.0), FLOAT32_DIGITS))


def factor_text(value: float, digits: int = 4) -> str:
    """A factor as the page writes one: ``2 x``, ``0.7448 x``, ``3.208e+04 x``."""
    return f"{value:.{digits}g} x"


def bullets(sentences: list[str]) -> str:
    """Sentences as a Markdown bullet list."""
    return "\n".join(f"- {sentence}" for sentence in sentences)
