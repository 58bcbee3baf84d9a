"""How far a low-precision step is from float32, written once for numpy and for jax.numpy.

Definitions (``xp`` is ``numpy`` on the host or ``jax.numpy`` inside a compiled program)::

    norm_rel_error(v, r) = ||v - r||_2 / ||r||_2      0 when both are 0, inf when only r is 0
    underflow_mask(v, r) = (v == 0) & (r != 0)        entries lost to zero
    nonfinite_mask(v)    = ~isfinite(v)               inf or NaN after an overflow
    lost_update_mask(before, after, update)
                         = (update != 0) & (after == before)
                           the optimizer asked for a change that rounding swallowed
    flushed_update_mask(grads, reference_grads, update)
                         = (update == 0) & underflow_mask(grads, reference_grads)
                           no change was asked for, because the gradient underflowed to 0
                           (reference_grads: float32's gradient at the same parameters)

The two masks never overlap (one needs update != 0, the other update == 0), so a training run
can count both ways an update is lost: before the optimizer (a flushed gradient) and after it
(an update rounded away when added to the stored weight).

A lost update uses the update the optimizer really produced (for SGD -lr x gradient, for
momentum or Adam something else), never a guess from the gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from playground.core.formats.dtypes import classify


def norm_ratio(difference_norm: Any, reference_norm: Any, xp: Any = np) -> Any:
    """||v - r|| / ||r|| from the two norms: 0 when both are 0, inf when only ||r|| is 0.

    Vectorized: the norms may be arrays (one entry per parameter), so a caller computes them
    the cheapest way it has (one ``reduceat`` on the host, ``jnp.linalg.norm`` in a program).
    """
    with np.errstate(all="ignore"):
        return xp.where(
            reference_norm > 0,
            difference_norm / xp.where(reference_norm > 0, reference_norm, 1),
            xp.where(difference_norm == 0, 0.0, xp.inf),
        )


def norm_rel_error(values: Any, reference: Any, xp: Any = np) -> Any:
    """||values - reference|| / ||reference|| of one tensor (see ``norm_ratio``)."""
    return norm_ratio(xp.linalg.norm(values - reference), xp.linalg.norm(reference), xp)


def underflow_mask(values: Any, reference: Any) -> Any:
    """Entries that are exactly zero in ``values`` but not in ``reference``."""
    return (values == 0) & (reference != 0)


def nonfinite_mask(values: Any, xp: Any = np) -> Any:
    """Entries that are inf or NaN."""
    return ~xp.isfinite(values)


def lost_update_mask(before: Any, after: Any, update: Any) -> Any:
    """Entries whose nonzero update left the stored value unchanged."""
    return (update != 0) & (after == before)


def flushed_update_mask(grads: Any, reference_grads: Any, update: Any) -> Any:
    """Entries whose update is zero because their gradient underflowed to zero (the gradient
    is 0 where ``reference_grads``, float32's at the same parameters, is not)."""
    return (update == 0) & underflow_mask(grads, reference_grads)


def magnitude_counts(float32_grads: np.ndarray, scaled_grads: np.ndarray, dtype: str) -> dict:
    """Where gradient entries sit in ``dtype``, before and after loss scaling.

    "before scaling": the float32 twin's gradient cast to the dtype as it is, i.e. what an
    unscaled low-precision gradient would at best be. "after scaling": the scaled gradients the
    low-precision backward pass actually produced. "lost to zero" counts entries that are zero
    there but not in float32; "non-finite" counts inf and NaN (after an overflow).
    """
    before, after = classify(float32_grads, dtype), classify(scaled_grads, dtype)
    return {
        "before scaling": {
            "lost to zero": before["flushed"],
            "subnormal": before["subnormal"],
            "non-finite": before["overflow"] + before["nonfinite"],
        },
        "after scaling": {
            "lost to zero": int(np.sum(underflow_mask(scaled_grads, float32_grads))),
            "subnormal": after["subnormal"],
            "non-finite": after["nonfinite"],
        },
        "entries": {"total": int(float32_grads.size)},
    }
