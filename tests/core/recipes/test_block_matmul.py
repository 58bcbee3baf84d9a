"""The block-scaled matmul's forward, gradients and statistics against a numpy reference
written here: each operand quantized block by block in numpy (ml_dtypes for the element and
E4M3 scale formats, E2M1's grid for stochastic rounding, scipy's Hadamard matrix), the cotangent
quantized the same way, the products in float64."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
import scipy.linalg
from block_reference import reference_quantize
from flax import nnx

from playground.core.recipes.block_formats import BLOCK_RECIPES, FP8_BLOCK, MXFP8, MXFP8_OCP
from playground.core.recipes.block_matmul import (
    SIGNS,
    block_dot_general,
    block_matmul,
    empty_meta,
    gradient_key,
    gradient_uniforms,
    matmul_path,
    native_scaled_dot_general,
)

E4M3, E2M1 = ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn


def reference_rotation(values: np.ndarray, key) -> np.ndarray:
    """Each run of 16 rows v -> (H S)^T v, H = scipy's Hadamard / 4, S the recipe's signs."""
    signs = np.asarray(jax.random.rademacher(jax.random.fold_in(key, SIGNS), (16,), jnp.float32))
    rotation = scipy.linalg.hadamard(16) / 4 * signs[None, :]
    rows = math.ceil(values.shape[0] / 16) * 16
    padded = np.zeros((rows, values.shape[1]))
    padded[: values.shape[0]] = values
    runs = padded.reshape(-1, 16, values.shape[1])
    return np.einsum("ji,bjc->bic", rotation, runs).reshape(padded.shape)


def padded(values: np.ndarray, tile) -> np.ndarray:
    rows, cols = (math.ceil(s / t) * t for s, t in zip(values.shape, tile, strict=True))
    return np.pad(values, ((0, rows - values.shape[0]), (0, cols - values.shape[1])))


def reference_matmul(x, w, g, recipe, key, hadamard):
    """(out, d_x, d_w) by the rule of ``core.recipes.block_matmul``, in numpy."""
    key = gradient_key(key, jnp.asarray(g))  # the backward's draws: an input of the rule
    n, k = x.shape
    m = w.shape[1]
    b = recipe.block
    tile_w = recipe.weight_tile or (b, 1)
    a = reference_quantize(x, (1, b), recipe)[:n, :k]
    w_forward = reference_quantize(w, tile_w, recipe)[:k, :m]
    x_in, g_in = x, g
    if hadamard and recipe.hadamard_block:
        x_in, g_in = reference_rotation(x, key), reference_rotation(g, key)
    rows_u = columns_u = None
    if recipe.stochastic_gradients:  # the recipe's draws: an input of the rule, not its logic
        rows_u, columns_u = (np.asarray(u) for u in gradient_uniforms(key, g_in.shape))
        rows_u, columns_u = padded(rows_u[:n], (1, b)), padded(columns_u, (b, 1))
    g_rows = reference_quantize(g, (1, b), recipe, rows_u)[:n, :m]
    w_back = w_forward if recipe.weight_tile else reference_quantize(w, (1, b), recipe)[:k, :m]
    x_cols = reference_quantize(x_in, (b, 1), recipe)
    g_cols = reference_quantize(g_in, (b, 1), recipe, columns_u)
    f64 = np.float64
    return (
        a.astype(f64) @ w_forward,
        g_rows.astype(f64) @ w_back.T,
        x_cols[: x_in.shape[0]].astype(f64).T @ g_cols[: g_in.shape[0]],
    )


def operands(seed: int, integers: bool):
    """x (40, 70) with an outlier, w (70, 24), g (40, 24): shapes no block divides. Integer
    entries (for the Hadamard case) make the rotation exact in float32 and float64 alike."""
    rng = np.random.default_rng(seed)
    if integers:
        x = rng.integers(-8, 9, (40, 70)).astype(np.float32)
        g = rng.integers(-8, 9, (40, 24)).astype(np.float32)
    else:
        x = rng.standard_normal((40, 70)).astype(np.float32)
        g = (rng.standard_normal((40, 24)) * 1e-3).astype(np.float32)
    x[3, 5] = 4096
    w = (rng.standard_normal((70, 24)) / 8).astype(np.float32)
    return x, w, g


@pytest.mark.parametrize(
    "name, hadamard",
    [
        ("mxfp8", False),
        ("mxfp8_ocp", False),
        ("fp8_block", False),
        ("nvfp4", False),
        ("nvfp4", True),
    ],
)
def test_forward_and_gradients_match_the_numpy_reference(name, hadamard):
    recipe = MXFP8_OCP if name == "mxfp8_ocp" else BLOCK_RECIPES[name]
    x, w, g = operands(seed=1, integers=hadamard)
    key = jax.random.key(5)

    @jax.jit
    def forward_and_back(x, w, g):
        out, pullback = jax.vjp(
            lambda x, w: block_matmul(x, w, empty_meta(), key, recipe, hadamard, False), x, w
        )
        return (out, *pullback(g))

    out, d_x, d_w = forward_and_back(jnp.asarray(x), jnp.asarray(w), jnp.asarray(g))
    expected = reference_matmul(x, w, g, recipe, key, hadamard)
    for ours, theirs in zip((out, d_x, d_w), expected, strict=True):
        scale = np.abs(theirs).max()
        np.testing.assert_allclose(np.asarray(ours), theirs, rtol=1e-5, atol=1e-6 * scale)


@pytest.mark.parametrize("recipe", [MXFP8, MXFP8_OCP], ids=lambda r: r.scale_rule)
def test_statistics_leave_through_meta(recipe):
    x, w, g = operands(seed=2, integers=False)

    def loss(x, w, meta):
        out = block_matmul(x, w, meta, jax.random.key(0), recipe, False, False)
        return jnp.sum(out * g)

    stats = np.asarray(
        jax.jit(jax.grad(loss, argnums=2))(jnp.asarray(x), jnp.asarray(w), empty_meta())
    )
    for row, (values, tile) in zip(stats, ((x, (1, 32)), (w, (32, 1)), (g, (1, 32))), strict=True):
        dequantized = reference_quantize(values, tile, recipe)[: values.shape[0], : values.shape[1]]
        flushed = int(np.sum((values != 0) & (dequantized == 0)))
        assert row.tolist()[0] == np.abs(values).max()
        assert row[1] == 1 and row[3] == flushed and row[4] == values.size
    # The outlier's block under the OCP rule saturates its largest entry, 4096 -> 448 x 2^3;
    # rounding the scale up never saturates.
    assert (stats[0, 2] >= 1) if recipe is MXFP8_OCP else (stats[:, 2] == 0).all()


@pytest.mark.slow
def test_dot_general_in_a_linear_layer():
    x, _, _ = operands(seed=3, integers=False)
    layer = nnx.Linear(70, 24, rngs=nnx.Rngs(0))
    layer.dot_general = lambda *args, **kwargs: block_dot_general(
        *args, **kwargs, meta=empty_meta(), recipe=FP8_BLOCK
    )
    kernel = np.asarray(layer.kernel[...])
    expected = reference_quantize(x, (1, 128), FP8_BLOCK)[:, :70] @ reference_quantize(
        kernel, (128, 128), FP8_BLOCK
    )[:70, :24] + np.asarray(layer.bias[...])
    np.testing.assert_allclose(np.asarray(layer(jnp.asarray(x))), expected, rtol=1e-5, atol=1e-5)


def test_dot_general_refuses_what_it_cannot_do():
    x, w = jnp.ones((4, 32)), jnp.ones((32, 2))
    numbers = (((1,), (0,)), ((), ()))
    with pytest.raises(ValueError, match="takes no fp8_scaling"):
        block_dot_general(x, w, numbers, meta=empty_meta(), scaling="current", recipe=MXFP8)
    with pytest.raises(ValueError, match="2-D batch"):
        block_dot_general(x[None], w, numbers, meta=empty_meta(), recipe=MXFP8)


def test_cpu_emulates_and_says_so():
    if jax.default_backend() != "cpu":
        pytest.skip("the native path needs a Blackwell GPU; this checks the CPU answer")
    assert native_scaled_dot_general("mxfp8") is False
    for recipe in BLOCK_RECIPES.values():
        assert matmul_path(recipe).startswith("emulated")


def test_gradient_uniforms_look_uniform_and_independent():
    rows, columns = (
        np.asarray(u, np.float64) for u in gradient_uniforms(jax.random.key(3), (256, 256))
    )
    other, _ = gradient_uniforms(jax.random.key(4), (256, 256))
    for draws in (rows, columns):
        assert draws.min() >= 0 and draws.max() < 1
        counts = np.histogram(draws, bins=16, range=(0, 1))[0]
        expected = draws.size / 16  # chi-square with 15 degrees of freedom: 99.9% below 37.7
        assert np.sum((counts - expected) ** 2 / expected) < 37.7
        assert abs(np.corrcoef(draws.ravel()[:-1], draws.ravel()[1:])[0, 1]) < 0.01
    assert abs(np.corrcoef(rows.ravel(), columns.ravel())[0, 1]) < 0.01
    assert abs(np.corrcoef(rows.ravel(), np.asarray(other).ravel())[0, 1]) < 0.01
