import math

import numpy as np

from playground import StepConfig, run_report
from playground.core.data.synthetic import make_batch
from playground.core.formats.dtypes import dtype_facts
from playground.core.recipes.registry import RECIPES
from playground.core.runs.sweep import (
    SAFE_FACTOR,
    _curves_over_scales,
    run_sweep,
    scale_batches,
    sweep_exponents,
)
from playground.core.settings.settings import LOSS_SCALE_MAX
from playground.core.step.policy import policy_for
from scenarios import TINY_FLOAT16

PLAIN_DTYPES = [name for name, entry in RECIPES.items() if entry.plain_dtype is not None]


def test_exponents_reach_past_the_dtype_maximum():
    for dtype in PLAIN_DTYPES:
        exponents = sweep_exponents(dtype)
        assert exponents[0] == 0
        legal = math.log2(LOSS_SCALE_MAX)  # 126: the last scale must be a legal loss scale
        assert 2.0 ** float(exponents[-1]) > dtype_facts(dtype).max or exponents[-1] == legal
    # float16 tops out below 2**16, so its sweep ends exactly there.
    assert sweep_exponents("float16")[-1] == 16


def test_sweep_agrees_with_single_reports_at_each_scale():
    sweep = run_sweep(TINY_FLOAT16)
    for exponent in (0, 10, 16):
        report = run_report(TINY_FLOAT16.replace(loss_scale=2.0**exponent))
        index = int(np.flatnonzero(sweep.exponents == exponent)[0])
        assert sweep.new_loss[index] == report.mixed_new_loss or (
            math.isnan(sweep.new_loss[index]) and math.isnan(report.mixed_new_loss)
        )
        worst = max(report.kernel.norm_rel_error, report.bias.norm_rel_error)
        # Two compiled programs may round float16 intermediates differently (XLA fusion), so
        # the errors agree to within one float16 ulp of the gradient, not bit for bit.
        eps = dtype_facts("float16").eps
        assert np.isclose(sweep.rel_error[index], worst, rtol=0, atol=eps, equal_nan=True)
        lost = report.kernel.underflow_count + report.bias.underflow_count
        assert sweep.underflow_share[index] == np.float32(lost / 36)


def test_float16_safe_window_contains_the_recovering_scale_and_excludes_the_extremes():
    sweep = run_sweep(TINY_FLOAT16)
    safe = set(sweep.safe_exponents.tolist())
    assert 10 in safe and 0 not in safe and 16 not in safe
    assert sweep.nonfinite_share[-1] == 1.0  # 2**16 is not a float16
    assert sweep.underflow_share[0] > 0.5
    best = np.nanmin(sweep.rel_error)
    assert all(sweep.rel_error[e] <= SAFE_FACTOR * best for e in safe)
    # The float32 baseline is the float32 twin of the same config.
    assert sweep.float32_new_loss == run_report(TINY_FLOAT16).float32_new_loss


def test_bfloat16_needs_no_scale_on_ordinary_data():
    sweep = run_sweep(StepConfig(n=32, d_in=8, d_out=4))
    # Every power of two up to 2**100 gives the same new loss, bit for bit.
    assert np.all(sweep.new_loss[:101] == sweep.new_loss[0])
    assert {0, 10, 100} <= set(sweep.safe_exponents.tolist())


def test_float8_sweeps_to_just_past_e5m2s_largest_and_current_scaling_makes_s_moot():
    # E5M2 (the recipe's gradient format, IEEE-style: bias 15, 2 mantissa bits) tops out at
    # 1.75 x 2^15, so the sweep ends at 2^16.
    assert sweep_exponents("float8")[-1] == math.floor(math.log2(1.75 * 2.0**15)) + 1 == 16
    sweep = run_sweep(StepConfig(n=32, d_in=8, d_out=4, compute_dtype="float8"))
    assert sweep.exponents.tolist() == list(range(17))
    # Current scaling maps every gradient's amax to 57344 whatever S is: with S a power of two
    # the float8 roundings, and so the error and the new loss, are the same at every scale.
    assert np.all(sweep.rel_error == sweep.rel_error[0]) and 0 < sweep.rel_error[0] < 1
    assert np.all(sweep.new_loss == sweep.new_loss[0])
    assert sweep.safe.all() and not sweep.nonfinite_share.any()


def _dots_in_sweep_program(config: StepConfig, count: int) -> int:
    """The matmuls in the text of the sweep's program lowered for ``count`` scales (padded as
    run_sweep pads them)."""
    batches, size = scale_batches(count)
    x, y = make_batch(config)
    lowered = _curves_over_scales.lower(
        np.uint32(config.model_seed),
        x,
        y,
        np.float32(config.lr),
        np.float32(config.loss_scale),
        np.ones(batches * size, np.float32),
        precision=policy_for(config),
        model=config.model_choice,
        optimizer=config.optimizer,
    )
    return lowered.as_text().count("dot_general")


def test_the_sweep_compiles_its_step_once_whatever_the_number_of_scales():
    # lax.map with a remainder (17 = 2 x 8 + 1) holds a second, vmapped copy of the step for
    # it: the scales come in batches of one size, so 17 scales hold as many matmuls as 8.
    for count in range(1, 130):
        batches, size = scale_batches(count)
        assert size <= 8 and (batches - 1) * 8 < count  # the fewest batches of at most 8
        assert count <= batches * size < count + batches  # each batch pads at most one scale
    config = TINY_FLOAT16
    counts = {n: _dots_in_sweep_program(config, n) for n in (8, 17, 127)}
    assert len(set(counts.values())) == 1 and counts[8] > 0, counts
