import dataclasses
import math

import jax
import numpy as np
import pytest

import reference
from playground import StepConfig, float32_step, make_batch, mixed_precision_step, run_report
from playground.core.settings.settings import LOSS_SCALE_MAX, SEED_MAX
from playground.core.step import compiled
from playground.core.step.report import _both_steps
from playground.sections.step.summary import summarize

SMALL = StepConfig(n=32, d_in=8, d_out=4, lr=0.1, loss_scale=1024.0)


def test_mixed_new_loss_equals_the_exercise_function_on_the_same_batch():
    for config in (SMALL, SMALL.replace(model_seed=9, data_seed=4, lr=0.3, loss_scale=3.7)):
        report = run_report(config)
        x, y = make_batch(config)
        args = (config.model_seed, x, y, config.lr, config.loss_scale)
        compiled = jax.jit(mixed_precision_step, static_argnums=0)(*args)
        assert report.mixed_new_loss == float(compiled[0])
        eager = float(mixed_precision_step(*args)[0])
        assert report.mixed_new_loss == pytest.approx(eager, rel=2 * 2.0**-7)
        assert report.float32_new_loss == pytest.approx(
            float(float32_step(config.model_seed, x, y, config.lr)[0]), rel=1e-6
        )


def test_both_paths_start_from_flax_default_init_even_for_the_largest_seed():
    config = SMALL.replace(model_seed=SEED_MAX)
    kernel, bias = reference.initial_params(SEED_MAX, 8, 4)
    report = run_report(config)
    np.testing.assert_array_equal(report.kernel.before, kernel)
    np.testing.assert_array_equal(report.bias.before, bias)


def test_statistics_follow_their_definitions():
    report = run_report(SMALL.replace(n=64, d_in=16, d_out=8))
    for param in report.params.values():
        mixed = param.mixed_grads.astype(np.float64)
        base = param.float32_grads.astype(np.float64)
        assert param.norm_rel_error == pytest.approx(
            np.linalg.norm(mixed - base) / np.linalg.norm(base), rel=1e-4
        )
        defined = base != 0
        rel = np.abs(mixed[defined] - base[defined]) / np.abs(base[defined])
        assert param.max_rel_error == pytest.approx(rel.max(), rel=1e-4)
        assert param.median_rel_error == pytest.approx(np.median(rel), rel=1e-4)
        assert param.underflow_count == int(np.sum((mixed == 0) & (base != 0)))
        assert param.nonfinite_count == 0
        np.testing.assert_allclose(param.mixed_grads, param.scaled_grads / 1024.0, rtol=1e-7)
        np.testing.assert_allclose(
            param.mixed_after, param.before - 0.1 * param.mixed_grads, rtol=1e-5, atol=1e-7
        )


def test_report_is_immutable_numpy():
    report = run_report(SMALL)
    with pytest.raises(dataclasses.FrozenInstanceError):
        report.mixed_new_loss = 0.0
    with pytest.raises(ValueError):
        report.kernel.mixed_grads[0, 0] = 1.0
    assert isinstance(report.kernel.before, np.ndarray)
    assert isinstance(report.mixed_new_loss, float)


def test_overflowing_loss_scale_is_a_result_not_an_error():
    # The largest legal scale is inf in float16: every scaled gradient is inf or NaN.
    report = run_report(SMALL.replace(loss_scale=LOSS_SCALE_MAX, compute_dtype="float16"))
    assert report.kernel.nonfinite_scaled_count == report.kernel.size
    assert report.kernel.nonfinite_count == report.kernel.size
    assert math.isnan(report.mixed_new_loss)
    assert math.isfinite(report.float32_new_loss)


def test_float16_underflow_is_recovered_by_a_scale_and_broken_by_a_larger_one():
    tiny = SMALL.replace(compute_dtype="float16", input_scale=2.0**-12, target_scale=2.0**-12)
    unscaled = run_report(tiny.replace(loss_scale=1.0))
    assert unscaled.kernel.underflow_count > unscaled.kernel.size // 2
    recovered = run_report(tiny.replace(loss_scale=2.0**10))
    assert recovered.kernel.underflow_count == 0
    assert recovered.kernel.norm_rel_error < 0.01 < unscaled.kernel.norm_rel_error
    # float16's largest value is below 2**16, so that scale overflows the backward pass.
    overflowed = run_report(tiny.replace(loss_scale=2.0**16))
    assert overflowed.kernel.nonfinite_scaled_count == overflowed.kernel.size


def test_compiled_once_per_shape_and_dtype(monkeypatch):
    # Past MAX_PROGRAMS programs the least recently used is evicted; how many the tests run
    # before this one compiled depends on their order, so the bound is lifted here.
    monkeypatch.setattr(compiled, "MAX_PROGRAMS", 10**6)
    run_report(SMALL)
    before = compiled.compiles(_both_steps)
    for seed, lr, scale in ((1, 0.2, 2.0), (2, 0.0, 3e5), (3, 5.0, 1e-3)):
        run_report(SMALL.replace(model_seed=seed, data_seed=seed, lr=lr, loss_scale=scale))
    assert compiled.compiles(_both_steps) == before
    run_report(SMALL.replace(n=33))
    assert compiled.compiles(_both_steps) == before + 1


def test_updates_below_half_the_float32_spacing_are_counted_as_lost():
    # Weights are ~0.3 (float32 spacing ~3e-8); lr 1e-12 makes every update ~1e-14.
    report = run_report(SMALL.replace(lr=1e-12))
    kernel = report.kernel
    assert np.array_equal(kernel.mixed_after, kernel.before)
    assert kernel.lost_update_count == int(np.count_nonzero(kernel.mixed_grads))
    assert any("rounded away entirely" in s for s in summarize(report)["reading"])
    # With lr = 0 there is no update at all, so nothing counts as lost.
    assert run_report(SMALL.replace(lr=0.0)).kernel.lost_update_count == 0
