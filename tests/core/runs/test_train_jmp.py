"""run_dynamics' mixed and float32 runs, replayed independently with jmp as the loss-scale oracle.

The replay is written here, not imported from ``playground``:

    initial params   nnx.Linear(d_in, d_out, rngs=nnx.Rngs(model_seed))     (flax's own init)
    scaled grads     jax.grad(float32(mse in the compute dtype) * S) w.r.t. the float32 params
    unscale          numpy float32 division g / S: exact at every finite S, where jmp's
                     ``unscale`` multiplies by 1 / S, and 2^-127 is a subnormal that XLA on CPU
                     flushes to zero
    finite check     jmp.all_finite
    scale policy     none: S = 1; static: S = loss_scale; dynamic: jmp.DynamicLossScale(S0,
                     counter=0, period, factor=2, min_loss_scale=min(1, S0)).adjust(finite)
    update           p + (-lr) * g in float32 (optax.sgd), skipped in dynamic mode when not finite
    loss curve       the float32 MSE before any update and after each of the ``steps`` updates

The float32 run is the same replay with float32 compute and S = 1.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import jmp
import numpy as np
import pytest
from flax import nnx

from helpers import dynamics_report
from playground import StepConfig, dynamics_summary, make_batch

# The final losses agree to float32 rounding: XLA may fuse the scan body's float32 arithmetic
# differently from the replay's (about 1 ulp on the "none" curve).
RTOL = 1e-6
WELL_SCALED = StepConfig(n=64, d_in=16, d_out=4, lr=0.1)


@dataclass(frozen=True)
class Case:
    config: StepConfig
    steps: int
    mode: str
    period: int = 2000


CASES = {
    # float16 cannot hold S0 = 2^20: back off to 2^15, then every 6th step tries 2^16 and skips.
    "float16-start-above-range": Case(
        WELL_SCALED.replace(compute_dtype="float16", loss_scale=2.0**20), 60, "dynamic", 5
    ),
    # (x @ W + b - y)^2 ~ 2^21 overflows float16 in the forward pass whatever S is. Same shapes,
    # steps and period as above, so run_dynamics reuses that compiled program.
    "float16-forward-overflow": Case(
        WELL_SCALED.replace(compute_dtype="float16", input_scale=2.0**10, target_scale=2.0**10),
        60,
        "dynamic",
        5,
    ),
    # Every step is finite, so the scale doubles each step until the next doubling is inf.
    "bfloat16-grow-to-cap": Case(WELL_SCALED, 300, "dynamic", 1),
    "period-longer-than-run": Case(WELL_SCALED, 40, "dynamic", 1000),
    "none-float16": Case(WELL_SCALED.replace(compute_dtype="float16"), 30, "none"),
    # S = 2^16 is inf in float16: the backward pass overflows and nothing skips the update.
    "static-float16-overflow": Case(
        WELL_SCALED.replace(compute_dtype="float16", loss_scale=2.0**16), 5, "static"
    ),
}
case_ids = pytest.mark.parametrize("name", list(CASES))


@dataclass(frozen=True)
class Replay:
    loss: np.ndarray  # (steps + 1,) float32
    scale: np.ndarray  # (steps,) float32, the scale used at each step
    skipped: np.ndarray  # (steps,) bool


@functools.partial(jax.jit, static_argnames="dtype")
def scaled_grads(params, x, y, scale, dtype):
    """float32 gradients of float32(MSE computed in ``dtype``) * scale w.r.t. float32 params."""

    def scaled_loss(params):
        kernel, bias = (p.astype(dtype) for p in params)
        loss = jnp.mean((x.astype(dtype) @ kernel + bias - y.astype(dtype)) ** 2)
        return loss.astype(jnp.float32) * scale

    return [g.astype(jnp.float32) for g in jax.grad(scaled_loss)(params)]


@jax.jit
def float32_loss(params, x, y):
    kernel, bias = params
    return jnp.mean((x @ kernel + bias - y) ** 2)


def replay(config: StepConfig, steps: int, mode: str, period: int, dtype: str) -> Replay:
    x, y = make_batch(config)
    model = nnx.Linear(config.d_in, config.d_out, rngs=nnx.Rngs(config.model_seed))
    params = [np.asarray(model.kernel[...]), np.asarray(model.bias[...])]
    assert all(p.dtype == np.float32 for p in params)
    start = np.float32(config.loss_scale)
    policy = jmp.DynamicLossScale(
        loss_scale=jnp.float32(start),
        counter=np.zeros([], np.int32),
        period=period,
        factor=2,
        min_loss_scale=np.float32(min(1.0, start)),
    )
    fixed = {"none": np.float32(1.0), "static": start}
    neg_lr = np.float32(-config.lr)
    losses, scales, skipped = [float32_loss(params, x, y)], [], []
    for _ in range(steps):
        scale = fixed[mode] if mode in fixed else np.float32(policy.loss_scale)
        assert scale.dtype == np.float32
        scales.append(scale)
        with np.errstate(all="ignore"):  # the static overflow case divides inf and nan
            grads = [np.asarray(g) / scale for g in scaled_grads(params, x, y, scale, dtype)]
        assert all(g.dtype == np.float32 for g in grads)
        finite = jmp.all_finite(grads)
        skip = mode == "dynamic" and not bool(finite)
        skipped.append(skip)
        if not skip:
            with np.errstate(all="ignore"):
                params = [p + neg_lr * g for p, g in zip(params, grads, strict=True)]
        if mode == "dynamic":
            policy = policy.adjust(finite)
        losses.append(float32_loss(params, x, y))
    return Replay(
        np.array(losses, np.float32), np.array(scales, np.float32), np.array(skipped, bool)
    )


@functools.cache
def mixed_replay(name: str) -> Replay:
    case = CASES[name]
    return replay(case.config, case.steps, case.mode, case.period, case.config.compute_dtype)


@functools.cache
def float32_replay(name: str) -> Replay:
    case = CASES[name]
    return replay(case.config, case.steps, "none", case.period, "float32")


def dynamics_run(name: str):
    """run_dynamics' report for the case ``name`` (once per process)."""
    case = CASES[name]
    return dynamics_report(case.config, case.steps, case.mode, case.period)


def both(name: str):
    """(the replay of the mixed run, run_dynamics' report) for the case ``name``."""
    return mixed_replay(name), dynamics_run(name)


@case_ids
def test_loss_curves_hold_the_loss_before_and_after_every_update(name):
    steps, dynamics = CASES[name].steps, dynamics_run(name)
    for run in ("float32", "mixed", "pure"):
        assert getattr(dynamics, f"{run}_loss").shape == (steps + 1,), run
    assert dynamics.mixed_scale.shape == dynamics.mixed_skipped.shape == (steps,)
    assert dynamics.mixed_skipped.dtype == bool


@case_ids
def test_mixed_scales_and_skips_match_jmp(name):
    expected, dynamics = both(name)
    np.testing.assert_array_equal(dynamics.mixed_scale, expected.scale, strict=True)
    np.testing.assert_array_equal(
        np.flatnonzero(dynamics.mixed_skipped), np.flatnonzero(expected.skipped)
    )


@case_ids
def test_mixed_loss_curve_matches_the_replay(name):
    # assert_allclose counts nan == nan and inf == inf (the static overflow case).
    np.testing.assert_allclose(dynamics_run(name).mixed_loss, mixed_replay(name).loss, rtol=RTOL)


@case_ids
def test_float32_loss_curve_matches_the_replay(name):
    np.testing.assert_allclose(
        dynamics_run(name).float32_loss, float32_replay(name).loss, rtol=RTOL
    )


@case_ids
def test_summary_reports_the_loss_after_the_last_update(name):
    dynamics, summary = dynamics_run(name), dynamics_summary(dynamics_run(name))
    final = {run: float(value) for run, value in summary["final_loss"].items()}  # "nan" -> nan
    assert set(final) == {"float32", "mixed", "pure"}
    np.testing.assert_allclose(final["mixed"], mixed_replay(name).loss[-1], rtol=RTOL)
    np.testing.assert_allclose(final["float32"], float32_replay(name).loss[-1], rtol=RTOL)
    for run in ("float32", "mixed", "pure"):
        last = getattr(dynamics, f"{run}_loss")[-1]
        np.testing.assert_array_equal(np.float32(final[run]), last, err_msg=run)
    assert summary["mixed_skipped_steps"] == np.flatnonzero(mixed_replay(name).skipped).tolist()


# What each case is for, checked on the oracle and on the report.


def test_float16_start_above_range_backs_off_then_probes():
    expected, dynamics = both("float16-start-above-range")
    skips = [0, 1, 2, 3, 4, *range(10, 60, 6)]
    assert np.flatnonzero(expected.skipped).tolist() == skips and len(skips) == 14
    assert np.flatnonzero(dynamics.mixed_skipped).tolist() == skips
    assert dynamics.mixed_applied == 60 - 14
    assert np.all(np.isfinite(dynamics.mixed_loss))
    assert dynamics.mixed_loss[-1] < 0.1 * dynamics.mixed_loss[0]


def test_float16_forward_overflow_skips_every_step_down_to_the_minimum_scale():
    expected, dynamics = both("float16-forward-overflow")
    halving = np.maximum(1024.0 / 2.0 ** np.arange(60), 1.0).astype(np.float32)
    assert expected.skipped.all() and dynamics.mixed_skipped.all()
    np.testing.assert_array_equal(expected.scale, halving)
    np.testing.assert_array_equal(dynamics.mixed_scale, halving)
    # Nothing was applied, so the master parameters, hence the loss, never moved.
    assert np.all(dynamics.mixed_loss == dynamics.mixed_loss[0])
    assert dynamics.mixed_applied == 0


def test_bfloat16_scale_grows_to_the_largest_finite_power_of_two_and_stays():
    expected, dynamics = both("bfloat16-grow-to-cap")
    assert expected.scale.max() == 2.0**127 and not expected.skipped.any()  # the oracle
    assert np.all(np.isfinite(dynamics.mixed_scale))
    assert dynamics.mixed_scale.max() == 2.0**127
    assert not dynamics.mixed_skipped.any()
    # 1024 * 2^k until k = 117, then the cap: 2^128 is inf in float32.
    assert dynamics.mixed_scale[117] == 2.0**127 and dynamics.mixed_scale[116] == 2.0**126


def test_period_longer_than_the_run_never_changes_the_scale():
    expected, dynamics = both("period-longer-than-run")
    assert np.all(expected.scale == 1024.0) and not expected.skipped.any()
    assert np.all(dynamics.mixed_scale == 1024.0) and not dynamics.mixed_skipped.any()


def test_none_uses_scale_one_and_never_skips():
    dynamics = dynamics_run("none-float16")
    assert np.all(dynamics.mixed_scale == 1.0) and not dynamics.mixed_skipped.any()


def test_static_overflow_reaches_the_update_and_poisons_the_weights():
    expected, dynamics = both("static-float16-overflow")
    assert np.all(dynamics.mixed_scale == 2.0**16) and not dynamics.mixed_skipped.any()
    assert np.isfinite(expected.loss[0]) and not np.isfinite(expected.loss[1:]).any()
    assert np.isfinite(dynamics.mixed_loss[0]) and not np.isfinite(dynamics.mixed_loss[1:]).any()


def test_replay_unscales_exactly_at_the_largest_scale():
    """The replay's numpy division by S = 2^127 is exact (its reciprocal is float32-subnormal)."""
    scale = np.float32(2.0**127)
    grads = np.float32([1e-3, -0.25, 3.0e-30, 1.5])
    assert np.all(grads * scale / scale == grads)
    assert np.float32(1.0) / scale == np.float32(2.0**-127) > 0  # numpy keeps subnormals
