"""The float8 recipe, checked against the format definitions, ml_dtypes and a float64 model.

The only facts typed in are the published layouts (E4M3FN: 4 exponent bits, 3 mantissa bits, bias
7, no infinity, only S.1111.111 is NaN; E5M2: IEEE-like, 5 and 2 bits, bias 15); every expected
value below is derived from them or computed with ml_dtypes / numpy in float64.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import reference
from playground.core.data.synthetic import make_batch
from playground.core.formats.dtypes import cast, dtype_facts, saturating_cast
from playground.core.recipes.float8 import (
    ROLE_FORMATS,
    ROLES,
    STATS,
    AmaxHistory,
    float8_matmul,
    quantize,
    scale_from_amax,
)
from playground.core.recipes.registry import COMPUTE_DTYPES, recipe
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report


def _fresh_meta() -> jax.Array:
    return AmaxHistory.fresh(1).metas()[0]


def test_the_recipe_is_e4m3_forward_and_e5m2_backward():
    assert "float8" in COMPUTE_DTYPES
    float8 = recipe("float8")
    assert (float8.forward_format, float8.gradient_format) == ("float8_e4m3fn", "float8_e5m2")
    assert recipe("bfloat16").forward_format == recipe("bfloat16").gradient_format == "bfloat16"
    # A recipe is no format: its formats have the facts.
    with pytest.raises(ValueError, match="dtype must be one of"):
        dtype_facts("float8")


def test_float8_facts_follow_the_format_definitions():
    e4m3, e5m2 = dtype_facts("float8_e4m3fn"), dtype_facts("float8_e5m2")
    # E4M3FN: bias 7; the all-ones exponent still holds numbers, only mantissa 111 there is NaN.
    assert e4m3.max == (1 + 0.5 + 0.25) * 2.0 ** (15 - 7) == 448
    assert e4m3.smallest_subnormal == 2.0 ** (1 - 7 - 3) == 2.0**-9
    assert e4m3.smallest_normal == 2.0**-6 and not e4m3.has_inf
    # E5M2: IEEE-like, bias 15; the all-ones exponent is inf and NaN.
    assert e5m2.max == (1 + 0.5 + 0.25) * 2.0 ** (30 - 15) == 57344
    assert e5m2.smallest_subnormal == 2.0 ** (1 - 15 - 2) == 2.0**-16
    assert e5m2.has_inf


def test_a_plain_cast_of_500_to_e4m3_is_nan_and_the_saturating_cast_gives_448():
    # numpy via ml_dtypes, JAX eagerly and compiled: all three agree that 500 becomes NaN.
    assert math.isnan(float(np.float32(500).astype(ml_dtypes.float8_e4m3fn)))
    assert math.isnan(float(jnp.float32(500).astype(jnp.float8_e4m3fn)))
    assert math.isnan(float(jax.jit(lambda v: v.astype(jnp.float8_e4m3fn))(jnp.float32(500))))
    assert math.isnan(float(cast(np.float32(500), "float8_e4m3fn")))
    values = np.array([500, -1e6, 448, np.inf, np.nan], np.float32)
    for xp in (np, jnp):
        stored = np.asarray(saturating_cast(xp.asarray(values), "float8_e4m3fn", xp), np.float64)
        assert stored[:3].tolist() == [448, -448, 448]
        assert np.isnan(stored[3:]).all()  # E4M3FN has no inf: an inf stays non-finite, as NaN
    # E5M2 has an inf: a plain cast of 61440 (halfway past 57344) gives it; saturation clips.
    assert np.isinf(cast(np.float32(61440), "float8_e5m2"))
    assert float(saturating_cast(np.float32(61440), "float8_e5m2")) == 57344


def test_jax_own_cast_gradient_zeroes_1e_4_and_the_float8_matmul_keeps_it():
    ones = jnp.ones((1, 1), jnp.float32)

    def through_jax_cast(x):
        return jnp.sum(x.astype(jnp.float8_e4m3fn).astype(jnp.float32) * 1e-4)

    assert float(jax.jit(jax.grad(through_jax_cast))(ones)[0, 0]) == 0.0  # rounded to E4M3

    def through_float8_matmul(x):
        return jnp.sum(float8_matmul(x, ones, _fresh_meta(), "none") * 1e-4)

    kept = float(jax.jit(jax.grad(through_float8_matmul))(ones)[0, 0])
    assert kept == float(np.float32(1e-4).astype(ml_dtypes.float8_e5m2)) > 0.9e-4


@pytest.mark.parametrize("scaling", ["none", "current"])
def test_the_backward_pass_rounds_the_arriving_gradient_to_e5m2(scaling):
    rng = np.random.default_rng(4)
    # Gradients from tiny to huge; unscaled, 1e5 and -7e4 saturate and 1e-6 (below 2^-17, half
    # E5M2's smallest subnormal) flushes to zero.
    d_out = (rng.standard_normal((6, 5)) * 2.0 ** rng.integers(-20, 12, (6, 5))).astype(np.float32)
    d_out[0, :3] = [1e5, -7e4, 1e-6]
    identity = jnp.eye(5, dtype=jnp.float32)  # exact in E4M3: d_lhs is the rounded gradient itself
    x = jnp.ones((6, 5), jnp.float32)

    @jax.jit
    def backward(d_out):
        _, pullback = jax.vjp(lambda a, m: float8_matmul(a, identity, m, scaling), x, _fresh_meta())
        return pullback(d_out)

    d_lhs, stats = backward(jnp.asarray(d_out))
    expected, scale = reference.float8_quantized(d_out, "float8_e5m2", scaling)
    np.testing.assert_allclose(np.asarray(d_lhs, np.float64), expected, rtol=2e-7, atol=0)
    gradient = dict(zip(STATS, np.asarray(stats[ROLES.index("gradient")]).tolist(), strict=True))
    scaled = d_out * scale  # float32, as the recipe multiplies
    with np.errstate(over="ignore"):  # saturated: what a plain cast would overflow to inf
        assert gradient["saturated"] == np.sum(np.isinf(scaled.astype(ml_dtypes.float8_e5m2)))
    assert gradient["flushed"] == np.sum(expected == 0)
    if scaling == "none":
        assert gradient["saturated"] > 0 and gradient["flushed"] > 0
    else:  # the amax maps to 57344: nothing is clipped, and fewer entries flush
        assert gradient["saturated"] == 0


@pytest.mark.parametrize("role", ROLES)
def test_current_scaling_maps_the_amax_to_the_format_max(role):
    fmt = ROLE_FORMATS[role]
    values = np.random.default_rng(2).standard_normal((8, 8)).astype(np.float32) * 1e-3
    amax = np.max(np.abs(values))
    scale = scale_from_amax(jnp.float32(amax), fmt, jnp.float32(1))
    stored, stats = quantize(jnp.asarray(values), fmt, scale)
    largest = float(ml_dtypes.finfo(reference.FLOAT8[fmt]).max)
    assert float(jnp.max(jnp.abs(stored.astype(jnp.float32)))) == largest
    assert float(stats[STATS.index("scale")]) == np.float32(largest) / amax
    assert float(stats[STATS.index("amax")]) == amax
    # Nothing to rescale: an all-zero tensor keeps the previous scale.
    assert float(scale_from_amax(jnp.float32(0), fmt, jnp.float32(3))) == 3


def test_delayed_scaling_takes_the_max_of_the_last_steps_amax():
    history = AmaxHistory.fresh(1, length=3)
    assert np.all(np.asarray(history.scale) == 1)  # a fresh history: TransformerEngine's scale 1
    record = jax.jit(AmaxHistory.record)
    amaxes = [1.0, 4.0, 2.0, 0.5, 0.25, 0.0]
    seen = []
    for amax in amaxes:
        stats = np.zeros((1, len(ROLES), len(STATS)), np.float32)
        stats[..., STATS.index("amax")] = amax
        history = record(history, jnp.asarray(stats))
        seen.append(amax)
        peak = max(seen[-3:])
        expected = [np.float32(dtype_facts(ROLE_FORMATS[r]).max) / np.float32(peak) for r in ROLES]
        np.testing.assert_array_equal(np.asarray(history.scale[0]), expected)
    # After 4 the window is [2, 0.5, 0.25], then [0.5, 0.25, 0]: the peak falls as 4 ages out.
    assert float(history.scale[0, 0]) == 448 / 0.5


@pytest.fixture(scope="module")
def linear_report():
    config = StepConfig(n=32, d_in=8, d_out=4, compute_dtype="float8", fp8_scaling="current")
    return config, run_report(config)


def test_float8_report_matches_the_float64_recipe(linear_report):
    config, report = linear_report
    x, y = make_batch(config)
    kernel, bias = reference.initial_params(config.model_seed, config.d_in, config.d_out)
    params = {"kernel": kernel, "bias": bias}
    loss, grads = reference.float8_model(params, x, y, None, "current", config.loss_scale)
    # float32 accumulation against float64: a few 2^-24 per term over D_in = 8 terms; no E4M3
    # or E5M2 rounding lands on the other side of a tie here (checked: it would cost 1/8 or 1/4
    # of an entry, far beyond the tolerance).
    assert report.mixed_initial_loss == pytest.approx(loss, rel=1e-5)
    for name, want in grads.items():
        got = report.params[name].mixed_grads.astype(np.float64)
        assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want), name


def test_float8_report_states_each_tensor_with_its_scale(linear_report):
    config, report = linear_report
    x, _ = make_batch(config)
    kernel, _ = reference.initial_params(config.model_seed, config.d_in, config.d_out)
    tensors = {t.role: t for t in report.float8}
    assert [t.layer for t in report.float8] == ["kernel"] * 3
    assert tensors["input"].scale == np.float32(448) / np.max(np.abs(x))
    assert tensors["kernel"].scale == np.float32(448) / np.max(np.abs(kernel))
    assert tensors["gradient"].format == "float8_e5m2"
    assert (tensors["input"].size, tensors["kernel"].size) == (x.size, kernel.size)
    assert all(t.saturated == 0 for t in report.float8)  # current scaling never clips
