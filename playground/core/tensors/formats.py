"""What a plain cast to each registered value format does to one tensor, counted exactly.

Rule, for a tensor x (its stored values, widened to float64 exactly) and a format F of
VALUE_FORMATS (the dtype registry's formats and block element formats; never its scale
formats), over the tensor's finite nonzero entries (``nonzero`` of them)::

    zero       share whose cast to F is 0 (flushed)
    subnormal  share whose cast is a nonzero subnormal of F
    overflow   share whose cast is not finite (inf, or NaN in a format without an infinity)
    saturated  share that round-to-nearest-even takes past F's largest value (past max plus
               half the gap below it, or on it where that tie rounds up): a saturating cast
               stores them as +-max
    rel_error  ||q - x|| / ||x|| in float64, q the saturating cast of x (so finite), over the
               finite entries; None for a tensor with no finite nonzero entry
    window     the powers of two S = 2^k (k within the loss scale's own range) for which S x
               keeps every entry: the smallest nonzero |x| times S does not cast to 0, and the
               largest times S does not saturate. Both are monotone in k, so the
               window is [low, high] (None when no S keeps both ends: the tensor's range is
               wider than F's)

The casts are numpy's and ml_dtypes' (``core.formats.dtypes.cast``), on the host: exact, with no
flush of subnormals (XLA on CPU would flush float32's and bfloat16's). A float64 tensor is cast as
ml_dtypes casts it, which rounds through float32 first for the narrow formats (a second
rounding only on a tie of float32's rounding).

The magnitude summary counts the entries (zeros, non-finite) and bins log2 |x| of the finite
nonzero ones by binade (floor(log2 |x|), from the exponent ``np.frexp`` reads: exact).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from playground.core.caps import LOSS_SCALE_MAX, LOSS_SCALE_MIN
from playground.core.formats.dtypes import BLOCK_ELEMENT_FORMATS, DTYPES, cast, dtype_facts

VALUE_FORMATS = DTYPES + BLOCK_ELEMENT_FORMATS
LOSS_SCALE_EXPONENTS = range(
    math.ceil(math.log2(LOSS_SCALE_MIN)), int(math.log2(LOSS_SCALE_MAX)) + 1
)


@dataclass(frozen=True)
class Magnitudes:
    """A tensor's entries by kind, its largest and smallest nonzero magnitude, and the count
    of finite nonzero entries per binade (``log2_counts[i]``: floor(log2 |x|) = log2_low + i)."""

    size: int
    nonzero: int
    zeros: int
    nonfinite: int
    amax: float | None
    smallest: float | None
    log2_low: int
    log2_counts: np.ndarray


@dataclass(frozen=True)
class Shares:
    """What one format (or recipe) does to a tensor's finite nonzero entries (module rule)."""

    zero: float | None
    subnormal: float | None
    overflow: float | None
    saturated: float | None
    rel_error: float | None


def magnitudes(values: np.ndarray) -> Magnitudes:
    """The magnitude summary of ``values`` (any float dtype)."""
    wide = np.asarray(values, np.float64).ravel()
    finite = np.isfinite(wide)
    live = np.abs(wide[finite & (wide != 0)])
    if live.size:
        binades = np.frexp(live)[1].astype(np.int64) - 1
        low = int(binades.min())
        counts = np.bincount(binades - low)
        amax, smallest = float(live.max()), float(live.min())
    else:
        low, counts, amax, smallest = 0, np.zeros(0, np.int64), None, None
    return Magnitudes(
        size=int(wide.size),
        nonzero=int(live.size),
        zeros=int(np.count_nonzero(wide == 0)),
        nonfinite=int(np.count_nonzero(~finite)),
        amax=amax,
        smallest=smallest,
        log2_low=low,
        log2_counts=counts,
    )


def past_the_edge(magnitude: np.ndarray, fmt: str) -> np.ndarray:
    """Whether round-to-nearest-even with ``fmt``'s precision but no exponent limit takes each
    magnitude past ``fmt``'s largest value: past the edge (max plus half the gap below it), or
    on it when max's last mantissa bit is odd (the tie goes away from max; float8_e4m3fn's max,
    1.75 x 2^8, is even and keeps its tie)."""
    facts = dtype_facts(fmt)
    binade = math.floor(math.log2(facts.max))
    half_gap = math.ldexp(1.0, binade - facts.mantissa_bits - 1)
    odd = int(math.ldexp(facts.max, facts.mantissa_bits - binade)) % 2 == 1
    edge = facts.max + half_gap
    return (magnitude > edge) | ((magnitude == edge) & odd)


def share(mask: np.ndarray, total: int) -> float | None:
    """The share of ``total`` entries that ``mask`` marks; None for no entries."""
    return float(np.count_nonzero(mask)) / total if total else None


def norm(values: np.ndarray) -> float:
    """The 2-norm of ``values``: a numpy sum of squares (BLAS's dot, which np.linalg.norm
    calls, starts threads that contend on a small shared CPU)."""
    return math.sqrt(float(np.sum(np.square(values))))


def rel_error(stored: np.ndarray, exact: np.ndarray) -> float | None:
    """||stored - exact|| / ||exact|| in float64 over the entries finite in both; None when
    exact's norm there is 0. Both norms are scaled by the largest |exact| first, so no square
    overflows or underflows in float64."""
    keep = np.isfinite(stored) & np.isfinite(exact)
    exact, stored = exact[keep], stored[keep]
    peak = float(np.max(np.abs(exact), initial=0.0))
    if peak == 0:
        return None
    return norm((stored - exact) / peak) / norm(exact / peak)


@dataclass(frozen=True)
class LiveEntries:
    """A tensor's finite nonzero entries, once per tensor for every format: as stored, widened
    to float64 exactly, their magnitudes and the largest (the error norms' scale)."""

    stored: np.ndarray
    exact: np.ndarray
    magnitude: np.ndarray
    peak: float

    @classmethod
    def of(cls, values: np.ndarray) -> LiveEntries:
        stored = np.asarray(values).ravel()
        wide = stored.astype(np.float64)
        live = np.isfinite(wide) & (wide != 0)
        exact = wide[live]
        magnitude = np.abs(exact)
        return cls(stored[live], exact, magnitude, float(np.max(magnitude, initial=0.0)))


def live_shares(entries: LiveEntries, fmt: str) -> Shares:
    """What the cast to ``fmt`` does to a tensor's live entries (see the module rule). The
    error counts only them: a zero adds nothing to either norm, a non-finite entry is left
    out, and a saturated entry is +-max, so every term is finite."""
    total = entries.exact.size
    if total == 0:
        return Shares(None, None, None, None, None)
    facts = dtype_facts(fmt)
    rounded = cast(entries.stored, fmt).astype(np.float64)
    magnitude = np.abs(rounded)
    beyond = past_the_edge(entries.magnitude, fmt)
    saturating = np.where(beyond, np.copysign(facts.max, entries.exact), rounded)
    scale = entries.peak
    error = norm((saturating - entries.exact) / scale)
    return Shares(
        zero=share(rounded == 0, total),
        subnormal=share((magnitude > 0) & (magnitude < facts.smallest_normal), total),
        overflow=share(~np.isfinite(rounded), total),
        saturated=share(beyond, total),
        rel_error=error / norm(entries.exact / scale),
    )


def cast_shares(values: np.ndarray, fmt: str) -> Shares:
    """What the cast of ``values`` to ``fmt`` does to them (see the module rule)."""
    return live_shares(LiveEntries.of(values), fmt)


def scale_window(summary: Magnitudes, fmt: str) -> tuple[int, int] | None:
    """(low, high) exponents of the powers of two that keep the tensor in ``fmt`` (module
    rule); None when none does or the tensor has no finite nonzero entry."""
    if summary.smallest is None or summary.amax is None:
        return None
    exponents = np.arange(LOSS_SCALE_EXPONENTS.start, LOSS_SCALE_EXPONENTS.stop)
    with np.errstate(over="ignore"):
        smallest = cast(np.ldexp(summary.smallest, exponents), fmt)
        kept = exponents[(smallest != 0) & ~past_the_edge(np.ldexp(summary.amax, exponents), fmt)]
    return (int(kept[0]), int(kept[-1])) if kept.size else None
