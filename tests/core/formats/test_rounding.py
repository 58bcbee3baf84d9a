"""The pure run's rounding rules against independent numpy / ml_dtypes computations.

Statistical checks use 5 standard deviations of the exact distribution (binomial counts, or a
sum of independent rounding errors), so a correct implementation fails about once in 1.7
million runs; the keys are fixed, so a run is reproducible anyway.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from playground.core.formats.rounding import apply_rounded, init_state, kahan_add, stochastic_round

BFLOAT16 = ml_dtypes.bfloat16
SIGMAS = 5


COPIES = 4000
SLOTS = 512  # every batch is padded to this many values, so each dtype compiles once


def draws(x: np.ndarray, dtype, seed: int = 0) -> np.ndarray:
    """COPIES independent stochastic roundings of float32 ``x`` (one key each), as float64."""
    x = np.asarray(x, np.float32)
    padded = np.zeros(SLOTS, np.float32)
    padded[: x.size] = x
    return np.asarray(_draws(padded, dtype, seed), np.float64)[:, : x.size]


@functools.partial(jax.jit, static_argnames="dtype")
def _draws(x: jax.Array, dtype, seed: int) -> jax.Array:
    keys = jax.random.split(jax.random.key(seed), COPIES)
    return jax.vmap(lambda key: stochastic_round(x, dtype, key))(keys).astype(jnp.float32)


def neighbours(x: np.ndarray, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi): the two values of ``dtype`` around each float32 ``x``, by ml_dtypes' nextafter."""
    nearest = x.astype(dtype)
    up = np.nextafter(nearest, np.full_like(nearest, np.inf))
    down = np.nextafter(nearest, np.full_like(nearest, -np.inf))
    above = nearest.astype(np.float64) > x
    lo = np.where(above, down, nearest).astype(np.float64)
    hi = np.where(above, nearest, up).astype(np.float64)
    return lo, hi


def assert_binomial(count: int, trials: int, p: float) -> None:
    sigma = np.sqrt(trials * p * (1 - p))
    assert abs(count - trials * p) <= SIGMAS * sigma + 1e-9, (count, trials * p, sigma)


# --- the facts: w = 1 + 1e-4, a thousand times, in bfloat16 --------------------------

UPDATE = BFLOAT16(1e-4)  # the update as the pure run holds it, in bfloat16
ADDS = 1000


@functools.partial(jax.jit, static_argnames=("rounding", "copies"))
def add_repeatedly(rounding: str, copies: int) -> jax.Array:
    """``copies`` bfloat16 weights 1.0, each getting UPDATE added ADDS times under ``rounding``."""
    params = jnp.ones(copies, jnp.bfloat16)
    updates = jnp.full(copies, UPDATE, jnp.bfloat16)

    def body(index, carry):
        params, state = carry
        key = jax.random.fold_in(jax.random.key(7), index)
        return apply_rounded(rounding, params, updates, state, key)

    return jax.lax.fori_loop(0, ADDS, body, (params, init_state(rounding, params)))[0]


def test_nearest_rounding_never_leaves_one():
    # Independently: ml_dtypes bfloat16 arithmetic rounds 1 + 1e-4 back to 1 every time.
    w = BFLOAT16(1.0)
    for _ in range(ADDS):
        w = BFLOAT16(w + UPDATE)
    assert w == 1.0
    assert np.all(np.asarray(add_repeatedly("nearest", 4), np.float64) == 1.0)


def test_kahan_reaches_bfloat16_nearest_to_one_point_one():
    # Independently: the Kahan loop in ml_dtypes bfloat16 scalars, each operation rounded.
    w, c = BFLOAT16(1.0), BFLOAT16(0.0)
    for _ in range(ADDS):
        y = BFLOAT16(UPDATE - c)
        t = BFLOAT16(w + y)
        c = BFLOAT16(BFLOAT16(t - w) - y)
        w = t
    assert float(w) == float(BFLOAT16(1.1)) == 1.1015625
    result = np.asarray(add_repeatedly("kahan", 4), np.float64)
    assert np.all(result == float(w))


def test_stochastic_rounding_averages_the_exact_sum():
    copies = 20_000
    final = np.asarray(add_repeatedly("stochastic", copies), np.float64)
    # Every weight stays in [1, 2), where bfloat16's gap is 2^-7: each add lands q = u / gap of
    # a gap above a grid point and rounds up with probability q, an error of variance
    # gap^2 q (1 - q). So E[w] = 1 + 1000 u exactly, Var[w] = 1000 gap^2 q (1 - q).
    gap = float(ml_dtypes.finfo(BFLOAT16).eps)
    q = float(UPDATE) / gap
    expected = 1 + ADDS * float(UPDATE)  # 1.10014: the "about 1.0995" is a sample
    sigma_mean = np.sqrt(ADDS * gap**2 * q * (1 - q) / copies)
    assert abs(final.mean() - expected) <= SIGMAS * sigma_mean
    assert abs(final.mean() - 1.0995) < 0.003
    np.testing.assert_allclose(final.std(), np.sqrt(ADDS * gap**2 * q * (1 - q)), rtol=0.05)
    assert final.max() < 2


# --- stochastic_round ------------------------------------------------------------------------


def test_one_plus_two_to_minus_ten_rounds_up_an_eighth_of_the_time():
    results = draws(np.full(25, 1 + 2**-10), jnp.bfloat16)  # 100,000 independent draws
    up = float(np.nextafter(BFLOAT16(1), BFLOAT16(2)))  # 1 + 2^-7
    assert set(np.unique(results)) == {1.0, up}
    assert_binomial(int(np.sum(results == up)), results.size, 2**-10 / 2**-7)  # 12.5%


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bfloat16", "float16"])
def test_unbiased_with_the_right_odds_between_the_two_neighbours(dtype):
    rng = np.random.default_rng(1)
    values = (rng.standard_normal(200) * 2.0 ** rng.integers(-12, 12, 200)).astype(np.float32)
    copies = COPIES
    results = draws(values, dtype)
    lo, hi = neighbours(values, np.dtype(dtype))
    assert np.all((results == lo) | (results == hi))
    p_up = (values - lo) / (hi - lo)  # float64: exact for these float32 values
    for count, p in zip(np.sum(results == hi, axis=0), p_up, strict=True):
        assert_binomial(int(count), copies, p)
    # Unbiased overall: the mean error in units of each value's gap, over all 800,000 draws.
    errors = (results - values) / (hi - lo)
    sigma = np.sqrt(np.sum(p_up * (1 - p_up)) * copies) / errors.size
    assert abs(errors.mean()) <= SIGMAS * sigma


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bfloat16", "float16"])
def test_values_on_the_grid_and_non_finite_values_come_back_unchanged(dtype):
    info = ml_dtypes.finfo(np.dtype(dtype))
    rng = np.random.default_rng(2)
    grid = rng.standard_normal(500).astype(np.dtype(dtype)).astype(np.float32)
    special = [0.0, -0.0, float(info.max), -float(info.max), float(info.smallest_normal)]
    special += [np.inf, -np.inf, np.nan]
    values = np.concatenate([grid, np.float32(special)])
    results = draws(values, dtype).astype(np.float32)
    np.testing.assert_array_equal(results, np.broadcast_to(values, results.shape))
    assert np.array_equal(np.signbit(results[0]), np.signbit(values))  # -0.0 stays -0.0


def test_negative_values_round_as_the_mirror_image():
    values = np.random.default_rng(3).standard_normal(SLOTS).astype(np.float32)
    plus, minus = draws(values, jnp.bfloat16, seed=4), draws(-values, jnp.bfloat16, seed=4)
    np.testing.assert_array_equal(minus, -plus)  # the same random bits, mirrored
    assert np.all(np.sign(plus) == np.sign(values))


def test_float16_subnormals_and_below_the_smallest():
    smallest = float(np.finfo(np.float16).smallest_subnormal)  # 2^-24
    # 2.5 s sits halfway between the subnormals 2 s and 3 s; 0.25 s between 0 and s.
    results = draws(np.repeat([2.5 * smallest, 0.25 * smallest], 10), jnp.float16)
    halfway, quarter = results[:, :10], results[:, 10:]  # 40,000 draws each
    assert set(np.unique(halfway)) == {2 * smallest, 3 * smallest}
    assert_binomial(int(np.sum(halfway == 3 * smallest)), halfway.size, 0.5)
    assert set(np.unique(quarter)) == {0.0, smallest}
    assert_binomial(int(np.sum(quarter == smallest)), quarter.size, 0.25)


def test_float16_between_max_and_the_next_power_of_two_is_max_or_inf():
    largest = float(np.finfo(np.float16).max)  # 65504; the grid's next point 65536 is inf
    results = draws(np.repeat([largest + 8, 70000.0], 10), jnp.float16)
    above_max, beyond = results[:, :10], results[:, 10:]  # 40,000 draws each
    assert set(np.unique(above_max)) == {largest, np.inf}
    assert_binomial(int(np.sum(np.isinf(above_max))), above_max.size, 8 / 32)
    assert np.all(beyond == np.inf)  # past the point inf sits at: the cast's inf


def test_the_same_key_gives_the_same_rounding():
    values = 1 + np.arange(1, SLOTS + 1) * 2.0**-12  # mostly off bfloat16's grid
    first, again = draws(values, jnp.bfloat16, seed=5), draws(values, jnp.bfloat16, seed=5)
    np.testing.assert_array_equal(first, again)
    assert np.mean(first != draws(values, jnp.bfloat16, seed=6)) > 0.1  # another key differs


# --- Kahan -----------------------------------------------------------------------------------


def test_kahan_add_matches_ml_dtypes_float16_step_by_step():
    rng = np.random.default_rng(6)
    params = rng.standard_normal(64).astype(np.float16)
    compensation = np.zeros(64, np.float16)
    updates = (rng.standard_normal((50, 64)) * 1e-4).astype(np.float16)
    step = jax.jit(kahan_add)
    p, c = jnp.asarray(params), jnp.asarray(compensation)
    for update in updates:
        y = update - compensation  # numpy float16 arithmetic, each result rounded
        total = params + y
        compensation = (total - params) - y
        params = total
        p, c = step(p, jnp.asarray(update), c)
    np.testing.assert_array_equal(np.asarray(p), params)
    np.testing.assert_array_equal(np.asarray(c), compensation)
