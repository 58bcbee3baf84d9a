"""The dtype registry: the one place a floating-point format is declared.

Rule: a format is one entry of ``DTYPES`` (a name numpy understands through JAX and ml_dtypes).
Every fact about it (largest value, smallest normal and subnormal, eps, bit widths, whether it
has an infinity) is read from ``jnp.finfo``; nothing is typed in. Sweep bounds, chart bands and
page text all read from here, so adding a dtype is one entry.

What a step computes in (the ``compute_dtype`` setting) is a recipe of ``core.step.policy``, not a
format: a recipe names the formats it uses (``recipe(name).forward_format`` for the weights and
inputs of every matmul, ``gradient_format`` for the gradient flowing back into it), and code that
needs one format's facts asks for the format of the tensor it is looking at.

Example::

    >>> dtype_facts("float8_e5m2").max
    57344.0
    >>> DTYPES[0]
    'float32'
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import numpy as np

# float32 first: it is the reference every other format is compared with.
DTYPES = ("float32", "bfloat16", "float16", "float8_e4m3fn", "float8_e5m2")
# The elements of a block-scaled recipe (NVFP4's E2M1) and its block scales (MXFP8's E8M0):
# facts and casts as for DTYPES. The number inspector shows every format of FORMATS.
BLOCK_ELEMENT_FORMATS = ("float4_e2m1fn",)
BLOCK_SCALE_FORMATS = ("float8_e8m0fnu",)
FORMATS = DTYPES + BLOCK_ELEMENT_FORMATS + BLOCK_SCALE_FORMATS
CLASSES = ("zero", "flushed", "subnormal", "normal", "overflow", "nonfinite")


@dataclass(frozen=True)
class DtypeFacts:
    """The limits of one floating-point dtype, all read from its finfo.

    bits = the sign bit (none in float8_e8m0fnu) + exponent_bits + mantissa_bits (the stored
    fraction; the leading 1 of a normal number is implicit). max is the largest finite value;
    eps the gap between 1 and the next value; decimal_digits = (mantissa_bits + 1) * log10(2);
    has_inf says whether an overflow gives inf (float8 E4M3FN, for one, has none and gives NaN);
    has_zero whether 0 is one of its values (float8_e8m0fnu, powers of two only, has none: its
    cast of 0 is NaN).
    """

    name: str
    bits: int
    exponent_bits: int
    mantissa_bits: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float
    decimal_digits: float
    has_inf: bool
    has_zero: bool = True


def _check_dtype(name: str) -> None:
    if name not in FORMATS:
        raise ValueError(f"dtype must be one of {', '.join(FORMATS)}; got {name!r}")


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype for a name in FORMATS (bfloat16 comes from ml_dtypes via JAX)."""
    _check_dtype(name)
    return np.dtype(jnp.dtype(name))


@functools.cache
def dtype_facts(name: str) -> DtypeFacts:
    """The limits of ``name`` (one of FORMATS), read from ``jnp.finfo``."""
    finfo = jnp.finfo(numpy_dtype(name))
    return DtypeFacts(
        name=name,
        bits=int(finfo.bits),
        exponent_bits=int(finfo.nexp),
        mantissa_bits=int(finfo.nmant),
        max=float(finfo.max),
        smallest_normal=float(finfo.smallest_normal),
        smallest_subnormal=float(finfo.smallest_subnormal),
        eps=float(finfo.eps),
        decimal_digits=(int(finfo.nmant) + 1) * math.log10(2),
        has_inf=bool(np.isinf(cast(np.float32(np.inf), name))),
        has_zero=bool(cast(np.float32(0.0), name) == 0),
    )


def cast(values: np.ndarray | float, dtype: str) -> np.ndarray:
    """``values`` cast to ``dtype`` with round-to-nearest-even; overflow gives inf silently (NaN
    in a format without an infinity: float8_e4m3fn turns 500 into NaN, not 448)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(values).astype(numpy_dtype(dtype))


def classify(values: np.ndarray, dtype: str) -> dict[str, int]:
    """Count where the entries of ``values`` land when cast to ``dtype``; keys are CLASSES.

    zero: already zero. flushed: nonzero but rounds to zero. subnormal / normal: the cast value's
    kind. overflow: finite but not finite after the cast (+-inf, or NaN in a format without an
    infinity such as float8_e4m3fn). nonfinite: already inf or nan. The cast itself
    decides every boundary, so ties (half the smallest subnormal, max + half an ulp) follow
    round-to-nearest-even exactly. The counts sum to ``values.size``.
    """
    original = np.asarray(values)
    result = cast(original, dtype).astype(np.float64)
    original = original.astype(np.float64)
    finite = np.isfinite(original)
    was_zero = original == 0
    live = finite & ~was_zero
    is_zero = result == 0
    overflow = live & ~np.isfinite(result)
    kept = live & ~is_zero & ~overflow
    subnormal = kept & (np.abs(result) < dtype_facts(dtype).smallest_normal)
    counts = {
        "zero": was_zero,
        "flushed": live & is_zero,
        "subnormal": subnormal,
        "normal": kept & ~subnormal,
        "overflow": overflow,
        "nonfinite": ~finite,
    }
    return {name: int(np.count_nonzero(mask)) for name, mask in counts.items()}


def log2_magnitude_bands(dtype: str) -> dict[str, float | bool]:
    """Where magnitudes land in ``dtype``, as log2 edges, and what this backend does below them.

    rounds_to_zero: log2 of half the smallest subnormal; a magnitude at or below it rounds to
      zero when cast (round to nearest, ties to even), one above it rounds up to the smallest
      subnormal. smallest_normal, max: the edges of the normal range; beyond max is overflow.
    subnormals_flushed_here: whether arithmetic on this backend flushes the dtype's subnormals
      to zero (see ``subnormals_flushed_here``), so that the IEEE subnormal band is unreachable.
    """
    facts = dtype_facts(dtype)
    return {
        "rounds_to_zero": math.log2(facts.smallest_subnormal) - 1,
        "smallest_normal": math.log2(facts.smallest_normal),
        "max": math.log2(facts.max),
        "subnormals_flushed_here": subnormals_flushed_here(dtype),
    }


@functools.cache
def _runtime_product():
    """``a * one`` as one jitted function, compiled once per dtype (not once per call)."""
    import jax  # the facts below that need a backend

    return jax.jit(lambda a, one: a * one)


@functools.cache
def subnormals_flushed_here(dtype: str) -> bool:
    """Whether a compiled product on this JAX backend turns ``dtype``'s subnormals into zero.

    Measured, not assumed: the smallest subnormal times a runtime 1 (a constant 1 would be
    folded away). XLA on CPU flushes float32 and bfloat16 subnormals (it sets flush-to-zero) but
    keeps float16's, whose arithmetic runs in float32 where they are normal numbers.
    """
    tiny = jnp.asarray(dtype_facts(dtype).smallest_subnormal, numpy_dtype(dtype))
    product = _runtime_product()(tiny, jnp.ones((), numpy_dtype(dtype)))
    return bool(product == 0)


def computed_here(value: float, dtype: str) -> float:
    """``value`` cast to ``dtype`` and passed through one compiled product on this backend.

    The IEEE value is ``float(cast(value, dtype))``; this is what the backend's arithmetic
    carries on with, which differs for subnormals where ``subnormals_flushed_here(dtype)``.
    """
    with np.errstate(over="ignore"):  # a value beyond float32 is inf, as the page shows
        stored = jnp.asarray(cast(np.asarray(value, np.float64).astype(np.float32), dtype))
    return float(_runtime_product()(stored, jnp.ones((), stored.dtype)))


def saturating_cast(values: Any, dtype: str, xp: Any = np) -> Any:
    """``values`` cast to ``dtype`` after clipping finite values to [-max, max] (``xp``: numpy on
    the host, jax.numpy in a program).

    This is how NVIDIA TransformerEngine casts to float8 (saturation): 500 becomes 448 in
    float8_e4m3fn where a plain cast gives NaN. An inf or NaN stays non-finite (inf becomes NaN
    in a format without an infinity), so an overflow upstream is never turned into a number.
    """
    largest = dtype_facts(dtype).max
    values = xp.asarray(values)
    with np.errstate(invalid="ignore"):
        clipped = xp.where(xp.isfinite(values), xp.clip(values, -largest, largest), values)
        return clipped.astype(numpy_dtype(dtype))
