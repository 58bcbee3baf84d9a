"""How a parameter stored in a low-precision dtype takes its update: three rounding rules.

Rule (``p`` stored in ``dtype``, ``u`` the optimizer's update in the same dtype)::

    nearest     p = dtype(p + u)                  round to nearest even (a plain cast); an
                                                  update under half the gap at p is lost
    stochastic  p = stochastic_round(float32(p) + float32(u), dtype, key)
                                                  round up with probability (v - lo) / (hi - lo)
                                                  between the two neighbours lo < v < hi, so
                                                  E[p] = p + u: no update is lost on average
    kahan       y = u - c; t = p + y; c = (t - p) - y; p = t
                                                  every operation in ``dtype`` rounded to
                                                  nearest; the compensation c (same dtype as p,
                                                  starting at 0) holds minus what the last
                                                  addition dropped and feeds it back next step
                                                  ("Revisiting BFloat16 Training", Zamirai et
                                                  al. 2020)

The stochastic sum float32(p) + float32(u) is exact when the update is at least about 2^-16 of
p (bfloat16; 2^-13 for float16); below that it is off by at most 2^-24 |p|, a 2^-17 share of
bfloat16's gap at p. Under Kahan, |p| >= |y| makes t - p and (t - p) - y exact (Fast2Sum), so
only the rounding of y = u - c loses anything.

Usage::

    state = init_state("kahan", params)                     # None for nearest and stochastic
    params, state = apply_rounded("kahan", params, updates, state, key)
    kept = unchanged(state_before, state)                   # tree of masks, or None
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import optax

ROUNDINGS = ("nearest", "stochastic", "kahan")

_SIGN = 0x80000000
_FRACTION_BITS = 23  # float32's stored fraction
_EXPONENT_BIAS = 127


@functools.partial(jax.jit, static_argnames="dtype")
def stochastic_round(x_f32: jax.Array, dtype: Any, key: jax.Array) -> jax.Array:
    """``x_f32`` rounded to ``dtype`` at random, up with probability (|x| - lo) / (hi - lo).

    Rule, on the magnitude |x| (the sign is put back after, so rounding is symmetric):

        lo, hi    the neighbours of |x| on dtype's grid: the grid of its binade (gap 2^(e - m)
                  for |x| in [2^e, 2^(e+1)), m the stored fraction bits), or of the subnormals
                  (gap = the smallest subnormal) below the smallest normal
        result    hi with probability (|x| - lo) / (hi - lo), else lo; E[result] = x exactly
        exact     a value on the grid (zero included) is returned unchanged
        above max the grid goes on as if the exponent did (for IEEE formats the next point
                  past the largest finite value is 2^(emax + 1), where inf sits); a point past
                  max comes out as dtype's own cast gives it: inf in bfloat16 and float16,
                  NaN in float8_e4m3fn (no inf). So |x| between max and that point is max or
                  inf/NaN with the right odds, and anything further is what the cast gives
        inf, NaN  pass through (as the cast gives them)

    Implemented on float32's bits: with d the count of float32 fraction bits below dtype's gap
    at |x|, lo is |x| with its d low bits cleared and the chance is those bits / 2^d, decided
    exactly by comparing them with 32 random bits (for |x| under 2^-8 of dtype's smallest
    subnormal, d > 32 and the chance is rounded down to a multiple of 2^-32). Works for any
    format whose values float32 holds (bfloat16, float16, float8). As everywhere on XLA's CPU
    backend, float32 and bfloat16 subnormals (below 2^-126) may be flushed to zero.

    Args:
      x_f32: values (converted to float32).
      dtype: the target dtype.
      key: a jax.random key; the same key gives the same result.
    """
    x = jnp.asarray(x_f32, jnp.float32)
    info = jnp.finfo(dtype)
    mantissa, min_exponent = int(info.nmant), int(info.minexp)
    bits = jax.lax.bitcast_convert_type(x, jnp.uint32)
    sign = bits & jnp.uint32(_SIGN)
    magnitude = bits ^ sign
    field = (magnitude >> _FRACTION_BITS).astype(jnp.int32)
    exponent = jnp.maximum(field, 1) - _EXPONENT_BIAS  # float32 subnormals: 2^-126 binade
    drop = (_FRACTION_BITS - mantissa) + jnp.maximum(min_exponent - exponent, 0)
    # Within |x|'s binade (d <= 23) the grid is every 2^d-th float32 bit pattern, and a carry
    # out of the fraction lands on the next power of two, the right upper neighbour.
    within = drop <= _FRACTION_BITS
    low_mask = (jnp.uint32(1) << jnp.minimum(drop, _FRACTION_BITS).astype(jnp.uint32)) - 1
    floor = magnitude & ~low_mask
    # Below the smallest subnormal s (d >= 24): lo = 0, hi = s, chance |x| / s = significand / 2^d.
    significand = (magnitude & jnp.uint32((1 << _FRACTION_BITS) - 1)) | jnp.where(
        field > 0, jnp.uint32(1 << _FRACTION_BITS), jnp.uint32(0)
    )
    smallest = jax.lax.bitcast_convert_type(jnp.float32(info.smallest_subnormal), jnp.uint32)
    lo = jnp.where(within, floor, jnp.uint32(0))
    hi = jnp.where(within, floor + (low_mask + 1), smallest)
    remainder = jnp.where(within, magnitude & low_mask, significand)
    # P(random < remainder * 2^(32 - d)) = remainder / 2^d for 32 uniform random bits.
    up_shift = jnp.clip(32 - drop, 0, 31).astype(jnp.uint32)
    down_shift = jnp.clip(drop - 32, 0, 31).astype(jnp.uint32)
    threshold = jnp.where(drop <= 32, remainder << up_shift, remainder >> down_shift)
    random = jax.random.bits(key, x.shape, jnp.uint32)
    rounded = jnp.where(random < threshold, hi, lo) | sign
    value = jax.lax.bitcast_convert_type(rounded, jnp.float32)
    return jnp.where(jnp.isfinite(x), value, x).astype(dtype)


def kahan_add(
    params: jax.Array, update: jax.Array, compensation: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """One Kahan-compensated addition, all in ``params``' dtype: returns (new params, new c).

        y = u - c;  t = p + y;  c = (t - p) - y;  p = t

    Each operation is the dtype's own, rounded to nearest; c starts at zeros.
    """
    dtype = params.dtype
    update, compensation = update.astype(dtype), compensation.astype(dtype)
    addend = update - compensation
    total = params + addend
    compensation = (total - params) - addend
    return total, compensation


def init_state(rounding: str, params: Any) -> Any:
    """The rounding's own state: Kahan's zero compensation (params' dtypes), else None."""
    _check(rounding)
    if rounding == "kahan":
        return jax.tree.map(jnp.zeros_like, params)
    return None


def apply_rounded(
    rounding: str, params: Any, updates: Any, state: Any, key: jax.Array | None = None
) -> tuple[Any, Any]:
    """params + updates under ``rounding`` (see the module rule): (new params, new state).

    ``key`` (stochastic only) is split into one key per parameter leaf.
    """
    _check(rounding)
    if rounding == "nearest":
        return optax.apply_updates(params, updates), state
    leaves, treedef = jax.tree.flatten(params)
    updates = treedef.flatten_up_to(updates)
    if rounding == "kahan":
        pairs = [
            kahan_add(p, u, c)
            for p, u, c in zip(leaves, updates, treedef.flatten_up_to(state), strict=True)
        ]
        params, state = ([pair[i] for pair in pairs] for i in (0, 1))
        return jax.tree.unflatten(treedef, params), jax.tree.unflatten(treedef, state)
    keys = jax.random.split(key, len(leaves))
    rounded = [
        stochastic_round(p.astype(jnp.float32) + u.astype(jnp.float32), p.dtype, k)
        for p, u, k in zip(leaves, updates, keys, strict=True)
    ]
    return jax.tree.unflatten(treedef, rounded), state


def unchanged(before: Any, after: Any) -> Any:
    """Per parameter entry, whether the rounding's state stayed the same (None: no state)."""
    if before is None:
        return None
    return jax.tree.map(lambda b, a: b == a, before, after)


def _check(rounding: str) -> None:
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {', '.join(ROUNDINGS)}; got {rounding!r}")
