"""Each value format's shares of a tensor, against counts made here with ml_dtypes' own casts:
zero, subnormal, overflow, saturated, the error in norm, and the loss-scale window found by
trying every power of two on the whole tensor."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from playground.core.caps import LOSS_SCALE_MAX, LOSS_SCALE_MIN
from playground.core.formats.dtypes import BLOCK_ELEMENT_FORMATS, DTYPES
from playground.core.tensors.formats import cast_shares, magnitudes, scale_window

FORMATS = DTYPES + BLOCK_ELEMENT_FORMATS


def numpy_type(fmt: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, fmt, None) or fmt)


def reference(values: np.ndarray, fmt: str) -> dict[str, float]:
    """The shares of ``values``' finite nonzero entries, counted with ml_dtypes' casts."""
    kind = numpy_type(fmt)
    info = ml_dtypes.finfo(kind)
    exact = values.astype(np.float64).ravel()
    with np.errstate(over="ignore", invalid="ignore"):
        rounded = values.ravel().astype(kind).astype(np.float64)
        # Past the overflow edge exactly when x / 2^j rounds past max / 2^j, for the j that
        # brings x into [max / 2, max) (exact, and normal there: the format's ties stay put).
        with np.errstate(divide="ignore"):
            j = np.maximum(0, np.floor(np.log2(np.abs(exact) / float(info.max))) + 1)
        j = np.where(np.isfinite(j), j, 0)
        shrunk = np.ldexp(np.where(np.isfinite(exact), exact, 0), -j.astype(np.int64))
        rounded_shrunk = shrunk.astype(kind).astype(np.float64)
    live = np.isfinite(exact) & (exact != 0)
    total = live.sum()
    beyond = live & (np.abs(rounded_shrunk) > np.ldexp(float(info.max), -j.astype(np.int64)))
    clipped = np.where(beyond, np.sign(exact) * float(info.max), rounded)
    keep = live | (exact == 0)
    return {
        "zero": (live & (rounded == 0)).sum() / total,
        "subnormal": (live & (rounded != 0) & (np.abs(rounded) < float(info.smallest_normal))).sum()
        / total,
        "overflow": (live & ~np.isfinite(rounded)).sum() / total,
        "saturated": beyond.sum() / total,
        "rel_error": np.linalg.norm(clipped[keep] - exact[keep]) / np.linalg.norm(exact[keep]),
    }


def spread(seed: int, shape: tuple[int, ...], low: float, high: float, dtype) -> np.ndarray:
    """Normal values times 2^uniform(low, high): many binades, both signs, a few zeros."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * np.exp2(rng.uniform(low, high, shape))
    values[rng.random(shape) < 0.05] = 0
    return values.astype(dtype)


CASES = [
    ("gradients", spread(1, (64, 33), -40, 0, np.float32)),
    ("activations", spread(2, (16, 8, 8), -8, 18, np.float32)),
    ("bfloat16", spread(3, (50,), -130, 30, ml_dtypes.bfloat16)),
    ("float16", spread(4, (9, 9), -24, 15, np.float16)),
    ("float64", spread(5, (200,), -160, 127, np.float64)),
    ("ties", np.float32([2.0**-25, 2.0**-25 * (1 + 2**-20), 65520.0, 65519.0, 7.0, 464.0, 1e-40])),
]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize(("case", "values"), CASES, ids=[c[0] for c in CASES])
def test_every_share_equals_an_ml_dtypes_count(fmt, case, values):
    shares = cast_shares(values, fmt)
    expected = reference(values, fmt)
    for key in ("zero", "subnormal", "overflow", "saturated"):
        assert getattr(shares, key) == expected[key], (case, fmt, key)
    assert shares.rel_error == pytest.approx(expected["rel_error"], rel=1e-9, abs=1e-300)


def test_half_the_smallest_float16_subnormal_rounds_to_zero_and_just_above_does_not():
    values = np.float32([2.0**-25, 2.0**-25 * (1 + 2**-20), 1.0, 1.0])
    assert cast_shares(values, "float16").zero == 0.25


def window_by_trying(values: np.ndarray, fmt: str) -> tuple[int, int] | None:
    """Every k in the loss scale's range for which 2^k values casts with no entry flushed and
    none past the overflow edge; checks that they are one run."""
    kind, live = numpy_type(fmt), values.astype(np.float64)
    live = live[np.isfinite(live) & (live != 0)]
    info = ml_dtypes.finfo(kind)
    kept = []
    low, high = round(math.log2(LOSS_SCALE_MIN)), round(math.log2(LOSS_SCALE_MAX))
    for k in range(low, high + 1):
        scaled = live * 2.0**k
        with np.errstate(over="ignore", invalid="ignore"):
            rounded = scaled.astype(kind).astype(np.float64)
            halved = (scaled / 2).astype(kind).astype(np.float64)
        # Half of a value at or past the edge rounds past half the largest (or overflows).
        within = np.isfinite(halved) & (np.abs(halved) <= float(info.max) / 2)
        if np.all(rounded != 0) and np.all(within):
            kept.append(k)
    assert kept == list(range(kept[0], kept[-1] + 1)) if kept else True
    return (kept[0], kept[-1]) if kept else None


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_loss_scale_window_is_every_power_of_two_that_keeps_the_tensor(fmt):
    for _, values in CASES[:4]:
        assert scale_window(magnitudes(values), fmt) == window_by_trying(values, fmt), fmt


@settings(max_examples=examples(20), deadline=None)
@given(
    st.lists(
        st.floats(min_value=-6e4, max_value=6e4, allow_nan=False, width=32), min_size=1, max_size=12
    ),
    st.sampled_from(FORMATS),
)
def test_any_float32_values(values, fmt):
    array = np.asarray(values, np.float32)
    if not np.any(array != 0):
        assert cast_shares(array, fmt).zero is None
        return
    shares, expected = cast_shares(array, fmt), reference(array, fmt)
    assert (shares.zero, shares.subnormal, shares.saturated) == (
        expected["zero"],
        expected["subnormal"],
        expected["saturated"],
    )


def test_the_magnitude_summary_bins_each_binade_exactly():
    values = np.float32([0.0, 1.0, 1.5, 2.0, -0.25, np.inf, np.nan, 2.0**-149])
    summary = magnitudes(values)
    assert (summary.size, summary.nonzero, summary.zeros, summary.nonfinite) == (8, 5, 1, 2)
    assert summary.log2_low == -149 and summary.log2_counts.size == 151
    assert summary.log2_counts[[0, 147, 149, 150]].tolist() == [1, 1, 2, 1]
    assert summary.amax == 2.0 and summary.smallest == 2.0**-149
