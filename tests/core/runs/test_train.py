import numpy as np
import pytest
from cost_by_hand import run_steps_by_hand

import reference
from playground import ConfigError, StepConfig, make_batch
from playground.core.runs.train import _three_runs, run_dynamics
from playground.core.step.compiled import compiles

WELL_SCALED = StepConfig(n=64, d_in=16, d_out=4, lr=0.1)


def float64_descent(config: StepConfig, steps: int) -> np.ndarray:
    """Plain full-batch gradient descent in float64: the loss before and after each step."""
    x, y = (a.astype(np.float64) for a in make_batch(config))
    kernel, bias = (p.astype(np.float64) for p in reference.initial_params(0, x.shape[1], 4))
    losses = []
    for _ in range(steps + 1):
        residual = x @ kernel + bias - y
        losses.append(np.mean(residual**2))
        d_prediction = 2 * residual / residual.size
        kernel = kernel - config.lr * x.T @ d_prediction
        bias = bias - config.lr * d_prediction.sum(axis=0)
    return np.array(losses)


def test_float32_run_follows_float64_gradient_descent():
    dynamics = run_dynamics(WELL_SCALED, 50)
    assert dynamics.float32_loss.shape == (51,)  # the initial loss, then one after each step
    np.testing.assert_allclose(dynamics.float32_loss, float64_descent(WELL_SCALED, 50), rtol=1e-4)


def test_float32_and_mixed_curves_agree_closely_on_well_scaled_data():
    dynamics = run_dynamics(WELL_SCALED, 100)
    relative = np.abs(dynamics.mixed_loss - dynamics.float32_loss) / dynamics.float32_loss
    assert relative.max() < 0.02
    assert dynamics.mixed_loss[-1] < 0.2 * dynamics.mixed_loss[0]  # it really trains
    assert not dynamics.mixed_skipped.any() and np.all(dynamics.mixed_scale == 1024.0)


def test_pure_bfloat16_stalls_where_master_weights_keep_improving():
    # lr * gradient is mostly below half of bfloat16's spacing at the weights, ~1e-3 here.
    slow = StepConfig(n=256, d_in=64, d_out=16, lr=0.002)
    dynamics = run_dynamics(slow, 300)
    pure_drop = 1 - dynamics.pure_loss[-1] / dynamics.pure_loss[0]
    mixed_drop = 1 - dynamics.mixed_loss[-1] / dynamics.mixed_loss[0]
    assert mixed_drop > 0.1 > 0.02 > pure_drop
    assert dynamics.pure_lost_share.mean() > 0.8
    assert dynamics.mixed_lost_share.max() < 0.01
    np.testing.assert_allclose(dynamics.mixed_loss, dynamics.float32_loss, rtol=0.01)


def test_dynamic_scaling_backs_off_skips_exactly_the_overflow_and_grows_again():
    # float16 cannot hold 2**16 at all, so every step at that scale overflows; 2**15 does not.
    period = 5
    config = WELL_SCALED.replace(compute_dtype="float16", loss_scale=2.0**16)
    dynamics = run_dynamics(config, 30, mode="dynamic", period=period)
    expected_skips = np.arange(0, 30, period + 1)
    np.testing.assert_array_equal(np.flatnonzero(dynamics.mixed_skipped), expected_skips)
    np.testing.assert_array_equal(np.flatnonzero(dynamics.pure_skipped), expected_skips)
    expected_scale = np.where(np.isin(np.arange(30), expected_skips), 2.0**16, 2.0**15)
    np.testing.assert_array_equal(dynamics.mixed_scale, expected_scale)
    assert dynamics.mixed_applied == 30 - expected_skips.size
    # A skipped step leaves the parameters, hence the next loss, unchanged.
    assert dynamics.mixed_loss[1] == dynamics.mixed_loss[0]
    assert dynamics.mixed_loss[2] < dynamics.mixed_loss[1]
    assert np.all(np.isfinite(dynamics.mixed_loss))


def test_static_overflow_is_not_skipped_and_poisons_the_weights():
    config = WELL_SCALED.replace(compute_dtype="float16", loss_scale=2.0**16)
    dynamics = run_dynamics(config, 3, mode="static")
    assert not dynamics.mixed_skipped.any()
    assert np.isfinite(dynamics.mixed_loss[0]) and np.isnan(dynamics.mixed_loss[1])


def test_no_scaling_uses_scale_one():
    dynamics = run_dynamics(WELL_SCALED, 5, mode="none")
    assert np.all(dynamics.mixed_scale == 1.0)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"steps": 0}, "steps"),
        ({"steps": 1001}, "steps"),
        ({"steps": 10, "mode": "adaptive"}, "mode"),
        ({"steps": 10, "mode": "dynamic", "period": 0}, "period"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ConfigError) as caught:
        run_dynamics(WELL_SCALED, **kwargs)
    assert caught.value.field == field and str(caught.value).startswith(field)


def test_steps_are_one_compiled_call_reused_across_rates_and_scales():
    run_dynamics(WELL_SCALED, 20)
    compiled = compiles(_three_runs)
    run_dynamics(WELL_SCALED.replace(lr=0.05, loss_scale=8.0, model_seed=3), 20)
    assert compiles(_three_runs) == compiled


def test_work_cap_scales_the_step_limit_with_the_shape():
    largest = StepConfig(n=4096, d_in=1024, d_out=1024)
    # steps x (N x D_in x D_out + 480 per parameter entry + 2^23) <= 2^35 (core.settings.cost): a
    # few seconds of training on 2 vCPUs (the run's compile is a one-off and caps nothing).
    medium = 1024 * 256 * 128 + (256 * 128 + 128) * 480 + 2**23
    medium_config = StepConfig(n=1024, d_in=256, d_out=128)
    assert medium_config.max_steps == run_steps_by_hand(medium) >= 250
    step = 4096 * 1024 * 1024 + (1024 * 1024 + 1024) * 480 + 2**23
    most = run_steps_by_hand(step)
    assert largest.max_steps == most >= 1
    with pytest.raises(ConfigError) as caught:
        run_dynamics(largest, most + 1)
    assert caught.value.field == "steps"
    assert f"[1, {most}]" in str(caught.value) and "4096 x 1024 x 1024" in str(caught.value)
    # An MLP counts every layer's multiply-adds: 2 hidden layers of 1024 at 1024 x 1024 in/out.
    mlp = StepConfig(n=256, d_in=1024, d_out=1024, model="mlp", hidden_layers=2)
    mlp = mlp.replace(hidden_width=1024)
    step = 256 * 3 * 1024 * 1024 + 3 * (1024 * 1024 + 1024) * 480 + 2**23
    assert mlp.model_work == 256 * 3 * 1024 * 1024
    assert mlp.max_steps == run_steps_by_hand(step) >= 1
