"""The seed exercise's step against an independent numpy model (tests/reference.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given, settings
from hypothesis import strategies as st

import reference
from helpers import examples
from playground import ConfigError, float32_step, mixed_precision_step
from playground.core.step.policy import EXERCISE
from playground.core.step.step import exercise_trace as step_trace
from playground.core.step.step import low_precision_loss

BF16_EPS = float(jnp.finfo(jnp.bfloat16).eps)


# One batch shape for the tests that run the step op by op: each operation compiles once per
# shape, so each further shape cost about 4 s of compiling in a cold run (the property test
# varies the shape, through one compiled program per shape).
SHAPE = (64, 8, 4)


def batch(n, d_in, d_out, seed=0, scale=1.0):
    rng = np.random.default_rng(seed)
    x = (scale * rng.standard_normal((n, d_in))).astype(np.float32)
    y = (scale * rng.standard_normal((n, d_out))).astype(np.float32)
    return x, y


def test_the_seed_precision_example_holds():
    assert float(jnp.asarray(1e-9, dtype=jnp.bfloat16)) > 0
    one, step = jnp.asarray(1.0, jnp.bfloat16), jnp.asarray(1e-4, jnp.bfloat16)
    assert float(one + step) == 1.0
    assert float(jnp.float32(1.0) + jnp.float32(1e-4)) > 1.0


def test_returns_float32_jax_array_of_shape_1():
    x, y = batch(*SHAPE)
    loss = mixed_precision_step(0, x, y, 0.1, 128.0)
    assert isinstance(loss, jax.Array)
    assert loss.shape == (1,) and loss.dtype == jnp.float32


@pytest.mark.parametrize("seed, lr, loss_scale", [(0, 0.1, 1024.0), (3, 0.5, 1.0), (7, 0.01, 3.7)])
def test_mixed_step_matches_numpy_model(seed, lr, loss_scale):
    x, y = batch(*SHAPE, seed)
    expected_initial, expected_new, *_ = reference.step(seed, x, y, lr, "bfloat16")
    loss = float(mixed_precision_step(seed, x, y, lr, loss_scale)[0])
    # The new loss is a bfloat16 value: allow a few bfloat16 ulps of the reference.
    assert loss == pytest.approx(expected_new, rel=4 * BF16_EPS)
    assert loss != pytest.approx(expected_initial, rel=BF16_EPS / 4)


@pytest.mark.parametrize("seed, lr", [(0, 0.1), (5, 0.3)])
def test_float32_twin_matches_float64_model(seed, lr):
    x, y = batch(*SHAPE, seed)
    _, expected_new, *_ = reference.step(seed, x, y, lr, "float32")
    assert float(float32_step(seed, x, y, lr)[0]) == pytest.approx(expected_new, rel=1e-5)


def test_gradients_are_float32_and_match_numpy_model():
    x, y = batch(*SHAPE, 1)
    trace = step_trace(1, jnp.asarray(x), jnp.asarray(y), 0.1, 256.0)
    _, _, kernel_grad, bias_grad = reference.step(1, x, y, 0.1, "bfloat16")
    for name, expected in (("kernel", kernel_grad), ("bias", bias_grad)):
        assert trace.grads[name].dtype == jnp.float32
        assert trace.scaled_grads[name].dtype == jnp.float32
        got = np.asarray(trace.grads[name], np.float64)
        assert np.linalg.norm(got - expected) <= 0.02 * np.linalg.norm(expected)
    # Scaled gradients hold values the bfloat16 backward pass produced: exact in bfloat16.
    scaled = np.asarray(trace.scaled_grads["kernel"])
    assert np.array_equal(reference.rounded(scaled, "bfloat16"), scaled.astype(np.float64))


def test_unscaling_happens_before_the_update():
    x, y = batch(*SHAPE, 2)
    trace = step_trace(2, jnp.asarray(x), jnp.asarray(y), 0.1, 2.0**10)
    for name in ("kernel", "bias"):
        np.testing.assert_array_equal(
            trace.grads[name], np.asarray(trace.scaled_grads[name]) / np.float32(2.0**10)
        )
        np.testing.assert_allclose(
            trace.params_after[name],
            np.asarray(trace.params_before[name]) - np.float32(0.1) * np.asarray(trace.grads[name]),
            rtol=1e-6,
            atol=1e-7,
        )


def test_lr_zero_leaves_the_loss_at_its_initial_value():
    x, y = batch(*SHAPE, 4)
    trace = step_trace(4, jnp.asarray(x), jnp.asarray(y), 0.0, 512.0)
    assert float(trace.new_loss[0]) == float(trace.initial_loss[0])
    expected_initial, *_ = reference.step(4, x, y, 0.0, "bfloat16")
    assert float(trace.new_loss[0]) == pytest.approx(expected_initial, rel=4 * BF16_EPS)


def test_power_of_two_scales_change_nothing_and_others_stay_within_rounding():
    x, y = batch(*SHAPE, 6)
    unscaled = float(mixed_precision_step(6, x, y, 0.2, 1.0)[0])
    for exponent in (-8, 1, 8, 15, 24, 60):
        # Multiplying by 2**k is exact in bfloat16 away from overflow and subnormals.
        assert float(mixed_precision_step(6, x, y, 0.2, 2.0**exponent)[0]) == unscaled
    for scale in (3.7, 1000.0, 12345.0):
        scaled = float(mixed_precision_step(6, x, y, 0.2, scale)[0])
        assert scaled == pytest.approx(unscaled, rel=2 * BF16_EPS)


def test_master_parameters_stay_float32_and_untouched_by_the_temporary_model():
    x, y = batch(*SHAPE)
    model = nnx.Linear(SHAPE[1], SHAPE[2], rngs=nnx.Rngs(0))
    kernel = np.array(model.kernel[...])
    loss = low_precision_loss(model, jnp.asarray(x), jnp.asarray(y), EXERCISE)
    assert loss.dtype == jnp.bfloat16
    assert model.kernel[...].dtype == jnp.float32 and model.bias[...].dtype == jnp.float32
    np.testing.assert_array_equal(model.kernel[...], kernel)
    trace = step_trace(0, jnp.asarray(x), jnp.asarray(y), 0.1, 8.0)
    assert all(trace.params_after[name].dtype == jnp.float32 for name in ("kernel", "bias"))


def test_jit_and_eager_agree_within_bfloat16_rounding():
    x, y = batch(*SHAPE, 8)
    eager = float(mixed_precision_step(8, x, y, 0.1, 64.0)[0])
    compiled = float(jax.jit(mixed_precision_step, static_argnums=0)(8, x, y, 0.1, 64.0)[0])
    assert compiled == pytest.approx(eager, rel=2 * BF16_EPS)


def test_accepts_jax_and_numpy_inputs_alike():
    x, y = batch(*SHAPE)
    from_numpy = mixed_precision_step(0, x, y, 0.1, 4.0)
    from_jax = mixed_precision_step(0, jnp.asarray(x), jnp.asarray(y), 0.1, 4.0)
    np.testing.assert_array_equal(from_numpy, from_jax)


@pytest.mark.parametrize(
    "args, field",
    [
        ((-1, "x", "y", 0.1, 1.0), "seed"),
        ((1.5, "x", "y", 0.1, 1.0), "seed"),
        ((2**32, "x", "y", 0.1, 1.0), "seed"),
        ((0, "x", "y", -0.1, 1.0), "lr"),
        ((0, "x", "y", float("nan"), 1.0), "lr"),
        ((0, "x", "y", float("inf"), 1.0), "lr"),
        ((0, "x", "y", 0.1, 0.0), "loss_scale"),
        ((0, "x", "y", 0.1, -2.0), "loss_scale"),
        ((0, "x", "y", 0.1, float("nan")), "loss_scale"),
        ((0, "x", "y", 0.1, float("inf")), "loss_scale"),
        ((0, "x", "y_rows", 0.1, 1.0), "y"),
        ((0, "x_1d", "y", 0.1, 1.0), "x"),
        ((0, "x", "y_empty", 0.1, 1.0), "y"),
        ((0, "x_text", "y", 0.1, 1.0), "x"),
    ],
)
def test_bad_arguments_raise_value_errors_naming_them(args, field):
    x, y = batch(8, 3, 2)
    arrays = {
        "x": x,
        "y": y,
        "y_rows": y[:5],
        "x_1d": x[:, 0],
        "y_empty": y[:, :0],
        "x_text": np.array([["a"]]),
    }
    seed, x_name, y_name, lr, loss_scale = args
    with pytest.raises(ConfigError) as caught:
        mixed_precision_step(seed, arrays[x_name], arrays[y_name], lr, loss_scale)
    assert isinstance(caught.value, ValueError)
    assert caught.value.field == field
    assert str(caught.value).startswith(field)


SHAPES = st.sampled_from([(8, 3, 2), (33, 5, 4), (64, 16, 1)])
# The model seed is static under jit, so each seed compiles a program of its own (about a second
# each): the smallest, an ordinary and the largest seed, while the data, the learning rate and
# the scale, which are arguments of one compiled program, vary freely.
MODEL_SEEDS = st.sampled_from([0, 12345, 2**32 - 1])
jitted_step = jax.jit(mixed_precision_step, static_argnums=0)


@settings(max_examples=examples(25), deadline=None)
@given(
    shape=SHAPES,
    seed=MODEL_SEEDS,
    data_seed=st.integers(0, 999),
    lr=st.floats(0.0, 0.5),
    exponent=st.integers(0, 20),
)
def test_property_step_tracks_numpy_model(shape, seed, data_seed, lr, exponent):
    n, d_in, d_out = shape
    x, y = batch(n, d_in, d_out, data_seed)
    loss = float(jitted_step(seed, x, y, lr, 2.0**exponent)[0])
    initial, expected, *_ = reference.step(seed, x, y, lr, "bfloat16")
    assert np.isfinite(loss)
    # Within bfloat16 rounding of the independent model, judged on the loss's own scale.
    assert abs(loss - expected) <= 8 * BF16_EPS * max(abs(expected), abs(initial))
