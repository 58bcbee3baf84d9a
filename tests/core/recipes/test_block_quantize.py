"""Block quantizers against peers: JAX's own block quantizer (MXFP8, NVFP4), ml_dtypes' formats,
and a numpy reference written here (the 128-block recipe, stochastic rounding, Hadamard).

JAX's quantizer is ``jax._src.cudnn.scaled_matmul_stablehlo.quantize``, the one behind
``jax.nn.scaled_dot_general``: a private name tied to the pinned jax (0.10), run on CPU, used in
these tests only. Its rules, read from its source, and how they compare with ours:

- MXFP8: scale = 2^ceil(log2(amax / 448)) (``cast_to_e8m0_with_rounding_up``), which is
  TransformerEngine's rule too: our registered "round_up" rule gives the same elements and
  scales. The OCP spec's rule (``MXFP8_OCP``, 2^(floor(log2 amax) - 8)) gives the same scale
  exactly where the block's amax has a significand of at most 1.75 (amax / 2^floor(log2 amax)
  <= 1.75), and half of it elsewhere; where the scales agree the elements agree.
- NVFP4: JAX divides by a caller-given global scale (default 1); TransformerEngine's rule sets it
  to amax_tensor / (448 x 6). Given that global scale, JAX's elements and E4M3 block scales
  equal ours. (JAX divides by a zero block scale and gives NaN; ours stores 0, not compared.)
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import scipy.linalg
from jax._src.cudnn.scaled_matmul_stablehlo import quantize as jax_quantize

from playground.core.recipes.block_formats import (
    FP8_BLOCK,
    MXFP8,
    MXFP8_OCP,
    NVFP4,
    e8m0_exponent,
    element_facts,
)
from playground.core.recipes.block_quantize import (
    hadamard_matrix,
    last_block_size,
    random_hadamard,
    round_to_nearest,
    stochastic_round,
)
from playground.core.recipes.block_quantize import quantize as quantize_eagerly

# One compiled program per case, rather than one per operation run eagerly.
quantize = jax.jit(quantize_eagerly, static_argnums=(1, 2))

E4M3, E2M1 = ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn


def batch(rows: int, cols: int, seed: int, outliers: int = 0) -> np.ndarray:
    """N(0, 1) float32 with a few entries multiplied by 2^14 (the outlier tensors)."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((rows, cols)).astype(np.float32)
    chosen = rng.choice(values.size, outliers, replace=False)
    values.reshape(-1)[chosen] *= np.float32(2**14)
    return values


CASES = [(8, 64, 0, 0), (4, 96, 1, 3)]  # (rows, cols, seed, outliers): random and outliers


@pytest.mark.parametrize("rows, cols, seed, outliers", CASES)
def test_mxfp8_round_up_equals_jax_quantizer(rows, cols, seed, outliers):
    values = batch(rows, cols, seed, outliers)
    config = jax.nn.get_scaled_dot_general_config("mxfp8")
    theirs, their_scales = jax_quantize(jnp.asarray(values)[None], config)
    ours = quantize(jnp.asarray(values), (1, 32), MXFP8)
    np.testing.assert_array_equal(np.asarray(ours.elements), np.asarray(theirs[0], np.float32))
    np.testing.assert_array_equal(np.asarray(ours.scales), np.asarray(their_scales[0], np.float32))
    assert not np.asarray(ours.saturated).any()  # rounding the scale up never saturates


@pytest.mark.parametrize("rows, cols, seed, outliers", CASES)
def test_mxfp8_ocp_agrees_with_jax_where_the_rules_agree(rows, cols, seed, outliers):
    values = batch(rows, cols, seed, outliers)
    config = jax.nn.get_scaled_dot_general_config("mxfp8")
    theirs, their_scales = jax_quantize(jnp.asarray(values)[None], config)
    their_scales = np.asarray(their_scales[0], np.float64)
    ours = quantize(jnp.asarray(values), (1, 32), MXFP8_OCP)
    amax = np.abs(values.astype(np.float64)).reshape(rows, cols // 32, 32).max(axis=-1)
    significand = amax / 2.0 ** np.floor(np.log2(amax))
    agree = significand <= 1.75
    assert agree.any() and (~agree).any()  # both kinds of block are exercised
    scales = np.asarray(ours.scales, np.float64)
    np.testing.assert_array_equal(scales[agree], their_scales[agree])
    np.testing.assert_array_equal(scales[~agree], their_scales[~agree] / 2)
    same = np.repeat(agree, 32, axis=1)
    np.testing.assert_array_equal(
        np.asarray(ours.elements)[same], np.asarray(theirs[0], np.float32)[same]
    )
    # The OCP rule saturates exactly the entries whose scaled magnitude passes 464 (where
    # ml_dtypes' plain E4M3 cast gives NaN).
    scaled = values / np.repeat(scales, 32, axis=1)
    np.testing.assert_array_equal(np.asarray(ours.saturated), np.isnan(scaled.astype(E4M3)))


@pytest.mark.parametrize("rows, cols, seed, outliers", CASES)
def test_nvfp4_equals_jax_quantizer_given_te_global_scale(rows, cols, seed, outliers):
    values = batch(rows, cols, seed, outliers)
    global_scale = np.float32(np.abs(values).max() / np.float32(448 * 6))
    config = jax.nn.get_scaled_dot_general_config("nvfp4", global_scale=jnp.float32(global_scale))
    theirs, their_scales = jax_quantize(jnp.asarray(values)[None], config)
    ours = quantize(jnp.asarray(values), (1, 16), NVFP4)
    assert float(ours.tensor_scale) == global_scale
    np.testing.assert_array_equal(np.asarray(ours.elements), np.asarray(theirs[0], np.float32))
    np.testing.assert_array_equal(np.asarray(ours.scales), np.asarray(their_scales[0], np.float32))


@pytest.mark.parametrize("recipe", [MXFP8, MXFP8_OCP, NVFP4], ids=lambda r: r.scale_rule)
def test_elements_and_scales_are_values_of_their_formats(recipe):
    values = batch(8, 64, 2, outliers=2)
    ours = quantize(jnp.asarray(values), (1, recipe.block), recipe)
    elements = np.asarray(ours.elements)
    element_type = getattr(ml_dtypes, recipe.element_format)
    np.testing.assert_array_equal(elements.astype(element_type).astype(np.float32), elements)
    scales = np.asarray(ours.scales)
    scale_type = getattr(ml_dtypes, recipe.scale_format)
    np.testing.assert_array_equal(scales.astype(scale_type).astype(np.float32), scales)
    largest = float(ml_dtypes.finfo(element_type).max)
    assert np.abs(elements).max() <= largest
    if recipe.scale_rule != "round_up":  # rounding the scale up leaves the top below the max
        assert np.abs(elements).max() == largest


def fp8_block_reference(values: np.ndarray, tile: tuple[int, int], given=None):
    """float64: zero-pad to the tile, s = amax / 448 per tile (or the ``given`` scales),
    elements = E4M3(x / s)."""
    rows = math.ceil(values.shape[0] / tile[0]) * tile[0]
    cols = math.ceil(values.shape[1] / tile[1]) * tile[1]
    padded = np.zeros((rows, cols))
    padded[: values.shape[0], : values.shape[1]] = values
    elements, scales = np.zeros_like(padded), np.ones((rows // tile[0], cols // tile[1]))
    for i in range(scales.shape[0]):
        for j in range(scales.shape[1]):
            part = (slice(i * tile[0], (i + 1) * tile[0]), slice(j * tile[1], (j + 1) * tile[1]))
            amax = np.abs(padded[part]).max()
            if given is not None:
                scales[i, j] = given[i, j]
            elif amax > 0:
                scales[i, j] = amax / 448
            elements[part] = (padded[part] / scales[i, j]).astype(E4M3).astype(np.float64)
    return elements, scales


@pytest.mark.parametrize("shape, tile", [((3, 300), (1, 128)), ((200, 150), (128, 128))])
def test_fp8_block_against_float64_reference(shape, tile):
    values = batch(*shape, seed=3, outliers=2)
    ours = quantize(jnp.asarray(values), tile, FP8_BLOCK)
    elements, scales = fp8_block_reference(values.astype(np.float64), tile)
    # XLA divides by the constant 448 as a multiplication by its reciprocal: within 1 ulp.
    np.testing.assert_allclose(np.asarray(ours.scales), scales, rtol=2**-23, atol=0)
    # Given the scales, every element is the float64 reference's E4M3 rounding of x / s.
    given, _ = fp8_block_reference(values.astype(np.float64), tile, np.asarray(ours.scales))
    np.testing.assert_array_equal(np.asarray(ours.elements), given)
    dequantized = np.asarray(ours.dequantized())
    assert dequantized.shape == shape
    # Each entry is off by at most half an E4M3 step of its block (2^-4 of the block's amax).
    bound = np.repeat(np.repeat(scales * 448 * 2.0**-4, tile[0], 0), tile[1], 1)
    assert np.all(np.abs(dequantized - values) <= bound[: shape[0], : shape[1]] * (1 + 1e-6))


def test_last_block_holds_the_remainder():
    assert [last_block_size(k, 32) for k in (1, 31, 32, 33, 64, 100)] == [1, 31, 32, 1, 32, 4]
    assert last_block_size(300, 128) == 300 - 2 * 128
    with pytest.raises(ValueError, match="length and block"):
        last_block_size(0, 32)


def test_stochastic_rounding_picks_a_neighbour_and_is_unbiased():
    grid = np.array(sorted({abs(float(v)) for v in np.arange(-8, 8, 0.125).astype(E2M1)}))
    assert grid.tolist() == [0, 0.5, 1, 1.5, 2, 3, 4, 6]  # ml_dtypes' E2M1 magnitudes
    draws = 20000
    round_e2m1 = jax.jit(functools.partial(stochastic_round, fmt="float4_e2m1fn"))
    for value in (0.3, -1.2, 2.5, 5.0, 6.0):
        uniform = jax.random.uniform(jax.random.key(7), (draws,))
        rounded = np.asarray(round_e2m1(jnp.full((draws,), value), uniform=uniform))
        low = grid[np.searchsorted(grid, abs(value), side="right") - 1]
        high = grid[min(np.searchsorted(grid, abs(value), side="left"), len(grid) - 1)]
        assert set(np.abs(rounded).tolist()) <= {low, high}
        p_up = 0 if high == low else (abs(value) - low) / (high - low)
        sigma = (high - low) * math.sqrt(p_up * (1 - p_up) / draws)
        assert abs(rounded.mean() - value) <= 5 * sigma + 1e-12


def test_hadamard_is_orthogonal_and_keeps_products_over_rows():
    np.testing.assert_allclose(hadamard_matrix(16), scipy.linalg.hadamard(16) / 4)
    x, g = batch(40, 5, 4, outliers=1), batch(40, 3, 5)
    key = jax.random.key(11)
    rotated_x, rotated_g = random_hadamard(jnp.asarray(x), 16, key), random_hadamard(g, 16, key)
    assert rotated_x.shape == (48, 5)  # 40 rows padded to 3 runs of 16
    product = np.asarray(rotated_x, np.float64).T @ np.asarray(rotated_g, np.float64)
    np.testing.assert_allclose(product, x.T.astype(np.float64) @ g, rtol=1e-5, atol=1e-3)
    # The outlier is spread over its 16 rows: the rotated run's amax is a quarter of it.
    assert np.abs(np.asarray(rotated_x)).max() < np.abs(x).max() / 3


def test_formats_facts_come_from_ml_dtypes():
    e4m3, e2m1 = element_facts("float8_e4m3fn"), element_facts("float4_e2m1fn")
    assert (e4m3.max, e4m3.emax, e4m3.overflow_edge) == (448.0, 8, 464.0)
    assert (e2m1.max, e2m1.emax, e2m1.overflow_edge) == (6.0, 2, 7.0)
    assert e2m1.smallest_normal == float(ml_dtypes.finfo(E2M1).smallest_normal)


@pytest.mark.parametrize("recipe", [MXFP8, FP8_BLOCK, NVFP4], ids=lambda r: r.name)
def test_non_finite_entries_stay_non_finite(recipe):
    values = batch(2, 64, 6)
    values[0, 3], values[1, 40] = np.inf, np.nan
    ours = quantize(jnp.asarray(values), (1, recipe.block), recipe)
    dequantized = np.asarray(ours.dequantized())
    assert np.isinf(dequantized[0, 3]) or np.isnan(dequantized[0, 3])
    assert np.isnan(dequantized[1, 40])
    assert not np.asarray(ours.saturated)[0, 3]  # an inf is not a saturated finite value


@pytest.mark.parametrize("fmt", ["float8_e4m3fn", "float4_e2m1fn"])
def test_round_to_nearest_is_the_formats_cast(fmt):
    largest = float(ml_dtypes.finfo(getattr(ml_dtypes, fmt)).max)
    # Every grid point, every midpoint between neighbours and values just off them.
    grid = np.unique(np.abs(np.linspace(-largest, largest, 4001, dtype=np.float32)))
    grid = np.unique(grid.astype(getattr(ml_dtypes, fmt)).astype(np.float32))
    midpoints = (grid[:-1] + grid[1:]) / 2
    probes = np.concatenate(
        [
            grid,
            midpoints,
            np.nextafter(midpoints, 0),
            np.nextafter(midpoints, np.float32(np.inf)),
            [1e-30, 0.0],
        ]
    ).astype(np.float32)
    probes = np.concatenate([probes, -probes])
    ours = np.asarray(jax.jit(round_to_nearest, static_argnums=1)(jnp.asarray(probes), fmt))
    np.testing.assert_array_equal(ours, probes.astype(getattr(ml_dtypes, fmt)).astype(np.float32))


def test_round_up_exponent_is_exact_down_to_the_smallest_normal_amax():
    """MXFP8's exponent, ceil(log2(amax / 448)) of the ratio rounded to 24 bits, against
    float64 over amax from float32's smallest normal up: a ratio below float32's normal range
    (flushed to zero on CPU) still gets its exponent, then clipped to E8M0's -127."""
    rng = np.random.default_rng(8)
    amax = np.float32(2.0) ** rng.uniform(-126, 127, 4000).astype(np.float32)
    powers = np.float32(448) * np.float32(2.0) ** np.arange(-134, 119, dtype=np.float32)
    amax = np.concatenate([amax, powers, [np.finfo(np.float32).tiny]]).astype(np.float32)
    mantissa, exponent = np.frexp(amax.astype(np.float64) / 448)
    ratio = np.ldexp(mantissa.astype(np.float32).astype(np.float64), exponent)  # 24 bits
    expected = np.clip(np.ceil(np.log2(ratio)), -127, 127)
    ours = jax.jit(e8m0_exponent, static_argnums=(1, 2))(
        jnp.asarray(amax), "float8_e4m3fn", "round_up"
    )
    np.testing.assert_array_equal(np.asarray(ours), expected)


@pytest.mark.parametrize("rule", ["ocp", "round_up"])
def test_e8m0_exponents_on_the_host_are_the_programs(rule):
    """numpy's float32 operations give the exponents XLA's do (the inspect command computes
    them on the host, with no compilation per shape): normal amaxes from 2^-126 to float32's top,
    and 0."""
    rng = np.random.default_rng(11)
    amax = np.abs(rng.standard_normal(20_000)).astype(np.float32)
    amax *= np.exp2(rng.uniform(-125, 126, amax.size)).astype(np.float32)
    amax = np.concatenate([amax, np.float32([0.0, 448.0, 2.0**-126, 3.4e38])])
    in_program = np.asarray(e8m0_exponent(jnp.asarray(amax), "float8_e4m3fn", rule))
    on_host = e8m0_exponent(amax, "float8_e4m3fn", rule, np)
    assert on_host.dtype == np.int32 and np.array_equal(on_host, in_program)
