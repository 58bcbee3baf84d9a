"""The matmuls' accumulation against a float64 numpy emulation of the same order.

The reference is written here: the products of a chunk summed in float64 and rounded once to
float32, the running sum added in float64, rounded to float32 and then to B significant bits
with ``np.frexp`` (round half to even by ``np.rint``; bfloat16's 8 bits also by ml_dtypes'
cast), promotion into a float64-added, float32-rounded total.
"""

from __future__ import annotations

import functools

import hypothesis.extra.numpy as hnp
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from playground.core.data.synthetic import make_batch
from playground.core.formats.accumulation import (
    ACCUMULATOR_BITS,
    CHUNK,
    Accumulation,
    accumulate,
    accumulated_matmul,
    round_significand,
)
from playground.core.model.models import initial_state, param_arrays
from playground.core.recipes.block_formats import MXFP8
from playground.core.recipes.block_matmul import block_dot_general, empty_meta
from playground.core.recipes.float8 import float8_matmul
from playground.core.settings.cost import ACCUMULATION_WORK_FACTOR, pass_work
from playground.core.settings.settings import ConfigError, StepConfig
from playground.core.step.accumulation_report import accumulation_report
from playground.core.step.policy import policy_for
from playground.core.step.report import run_report


def reference_round(values: np.ndarray, bits: int) -> np.ndarray:
    """float32 values at ``bits`` significant bits, round half to even (float64 arithmetic)."""
    values = np.asarray(values, np.float64)
    mantissa, exponent = np.frexp(values)  # |mantissa| in [0.5, 1)
    rounded = np.ldexp(np.rint(np.ldexp(mantissa, bits)), exponent - bits)
    with np.errstate(over="ignore"):  # past float32's largest: inf, as the hardware rounds
        return rounded.astype(np.float32)


def reference_accumulate(lhs, rhs, bits: int, interval: int) -> np.ndarray:
    """The module's accumulation order, in float64 numpy (see the module docstring)."""
    lhs, rhs = np.asarray(lhs, np.float64), np.asarray(rhs, np.float64)
    k = lhs.shape[1]
    low = np.zeros((lhs.shape[0], rhs.shape[1]), np.float32)
    total = np.zeros_like(low)
    for index, start in enumerate(range(0, k, CHUNK)):
        partial = (lhs[:, start : start + CHUNK] @ rhs[start : start + CHUNK]).astype(np.float32)
        low = reference_round((low.astype(np.float64) + partial).astype(np.float32), bits)
        if interval and (index + 1) % (interval // CHUNK) == 0:
            total = (total.astype(np.float64) + low).astype(np.float32)
            low = np.zeros_like(low)
    return (total.astype(np.float64) + low).astype(np.float32)


finite_floats = hnp.arrays(
    np.float32,
    64,  # one shape: one compile per bit count
    elements=st.floats(width=32, allow_nan=False, allow_infinity=False, allow_subnormal=False),
)


@settings(deadline=None, max_examples=examples(40))
@given(finite_floats, st.sampled_from([8, 11, 14, 20]))
def test_round_significand_is_round_half_to_even_at_the_kept_bits(values, bits):
    expected = reference_round(values, bits)
    np.testing.assert_array_equal(np.asarray(round_significand(values, bits)), expected)


def test_eight_bits_are_bfloat16_and_ties_go_to_even():
    values = np.random.default_rng(0).standard_normal(4096).astype(np.float32) * 1e3
    ties = np.float32([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8)])  # halfway at 8 bits
    values = np.concatenate([values, ties])
    as_bfloat16 = values.astype(ml_dtypes.bfloat16).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(round_significand(values, 8)), as_bfloat16)
    np.testing.assert_array_equal(np.asarray(round_significand(ties, 8)), [1, 1 + 2**-6, -1])
    top = np.float32(np.finfo(np.float32).max)
    assert np.isinf(np.asarray(round_significand(top, 8)))  # rounds past the largest
    assert np.isnan(np.asarray(round_significand(np.float32("nan"), 8)))


@pytest.mark.parametrize("name", ["bfloat16", "14_bits"])
@pytest.mark.parametrize("interval", [0, 64])
def test_integer_products_match_the_reference_bit_for_bit(name, interval):
    # Integers: every chunk's sum (under 2^20) is exact in float32 in any order, so only the
    # running sums' rounding (past 2^14) and the promotions decide: both sides agree exactly.
    rng = np.random.default_rng(1)
    lhs = rng.integers(-127, 128, (5, 200)).astype(np.float32)
    rhs = rng.integers(-127, 128, (200, 3)).astype(np.float32)
    rule = Accumulation(name, interval)
    out = np.asarray(accumulate(jnp.asarray(lhs), jnp.asarray(rhs), rule))
    expected = reference_accumulate(lhs, rhs, ACCUMULATOR_BITS[name], interval)
    np.testing.assert_array_equal(out, expected)
    exact = lhs.astype(np.float64) @ rhs
    assert not np.array_equal(out, exact)  # the accumulator did lose something


@pytest.mark.parametrize("name", ["bfloat16", "14_bits"])
def test_normal_products_match_the_reference_within_one_unit(name):
    rng = np.random.default_rng(2)
    lhs = rng.standard_normal((8, 320)).astype(np.float32)
    rhs = rng.standard_normal((320, 4)).astype(np.float32)
    bits = ACCUMULATOR_BITS[name]
    out = np.asarray(accumulate(jnp.asarray(lhs), jnp.asarray(rhs), Accumulation(name, 128)))
    expected = reference_accumulate(lhs, rhs, bits, 128)
    # XLA's float32 chunk sums may differ from the correctly rounded ones by float32 ulps,
    # which can move a running sum across a rounding boundary: at most one unit of B bits of
    # the running sums (three promotions here, each a B-bit value).
    unit = np.ldexp(np.abs(expected).max() + 1, -bits + 2)
    assert np.max(np.abs(out - expected)) <= unit
    assert np.mean(out == expected) > 0.8


@pytest.mark.slow
def test_backward_matmuls_accumulate_by_the_same_rule():
    rng = np.random.default_rng(3)
    lhs = rng.integers(-15, 16, (40, 70)).astype(np.float32)
    rhs = rng.integers(-15, 16, (70, 6)).astype(np.float32)
    cotangent = rng.integers(-15, 16, (40, 6)).astype(np.float32)
    rule = Accumulation("bfloat16", 0)
    _, pullback = jax.vjp(functools.partial(accumulated_matmul, accumulation=rule), lhs, rhs)
    d_lhs, d_rhs = (np.asarray(g) for g in pullback(jnp.asarray(cotangent)))
    np.testing.assert_array_equal(d_lhs, reference_accumulate(cotangent, rhs.T, 8, 0))
    np.testing.assert_array_equal(d_rhs, reference_accumulate(lhs.T, cotangent, 8, 0))


def test_the_policy_takes_the_setting_and_float32_drops_its_interval():
    assert policy_for(StepConfig()).accumulation == Accumulation()
    assert policy_for(StepConfig(promotion_interval=128)) == policy_for(StepConfig())
    chosen = policy_for(StepConfig(accumulation="14_bits", promotion_interval=128))
    assert chosen.accumulation == Accumulation("14_bits", 128)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"accumulation": "float16"}, "accumulation"),
        ({"promotion_interval": 100}, "promotion_interval"),
        ({"promotion_interval": -32}, "promotion_interval"),
        ({"promotion_interval": 8192}, "promotion_interval"),
        ({"moments_dtype": "int8"}, "moments_dtype"),
    ],
)
def test_bad_values_are_refused_naming_the_field_and_range(changes, field):
    with pytest.raises(ConfigError) as refused:
        StepConfig(**changes)
    assert refused.value.field == field
    assert str(refused.value).startswith(f"{field} (")
    assert "[0, 4096]" in str(refused.value) or "one of" in str(refused.value)


def first_layer_error(config: StepConfig, rows: int, bits: int, interval: int) -> float:
    """The first layer's accumulator output error, by the numpy reference, on the batch's first
    ``rows`` rows in bfloat16 (the step's first matmul operands)."""
    x = make_batch(config)[0][:rows]
    shapes = {"choice": config.model_choice, "d_in": config.d_in, "d_out": config.d_out}
    state = initial_state(np.uint32(config.model_seed), **shapes)
    kernel = np.asarray(param_arrays(state)["kernel"])
    as_bf16 = [a.astype(ml_dtypes.bfloat16).astype(np.float32) for a in (x, kernel)]
    exact = as_bf16[0].astype(np.float64) @ as_bf16[1]
    out = reference_accumulate(*as_bf16, bits, interval)
    return np.linalg.norm(out - exact) / np.linalg.norm(exact)


def test_a_bfloat16_accumulator_at_1024_inputs_loses_more_and_promotion_buys_it_back():
    base = StepConfig(n=64, d_in=1024, d_out=4)
    x = make_batch(base)[0]
    shapes = {"choice": base.model_choice, "d_in": base.d_in, "d_out": base.d_out}
    kernel = np.asarray(param_arrays(initial_state(np.uint32(0), **shapes))["kernel"])

    def figures(**changes):
        return accumulation_report(base.replace(**changes), x, kernel, "bfloat16")

    float32 = figures()
    plain = figures(accumulation="bfloat16")
    promoted = figures(accumulation="bfloat16", promotion_interval=128)
    assert float32.output_rel_error < 1e-6 < promoted.output_rel_error
    assert plain.output_rel_error > 2 * promoted.output_rel_error
    for report, interval in ((plain, 0), (promoted, 128)):
        reference = first_layer_error(base, report.rows, 8, interval)
        assert report.output_rel_error == pytest.approx(reference, rel=0.05)
    # The growth curve: the error without promotion grows with D_in, promoted it stays flat.
    assert plain.growth_error[-1] > 3 * plain.growth_error[0]
    assert max(plain.growth_promoted_error) < 1.5 * plain.growth_promoted_error[0]


def test_the_step_report_measures_its_own_first_layer():
    # The linear model at the default shape, bfloat16 compute: the report's figure is the
    # first layer's error on the step's own operands (checked against the reference).
    config = StepConfig(n=32, d_in=96, d_out=4, accumulation="14_bits")
    report = run_report(config).accumulation
    assert report.accumulation == "14_bits" and report.rows == 32
    expected = first_layer_error(config, report.rows, 14, 0)
    assert report.output_rel_error == pytest.approx(expected, rel=0.05)
    assert report.output_rel_error > report.float32_output_rel_error


def test_the_cost_model_prices_an_emulated_accumulation_by_its_measured_factor():
    default = StepConfig(n=64, d_in=256, d_out=8)
    emulated = default.replace(accumulation="14_bits")
    extra = default.model_work * (ACCUMULATION_WORK_FACTOR - 1)  # bfloat16's factor is 1
    assert pass_work(emulated) == pytest.approx(pass_work(default) + extra)
    assert pass_work(default.replace(promotion_interval=128)) == pass_work(default)


@pytest.mark.slow
def test_quantizing_recipes_accumulate_their_products_by_the_setting():
    # Integers of at most 4 bits are exact in E4M3 (and, scaled by a power of two, in an
    # MXFP8 block), and the arriving gradient's of at most 3 bits in E5M2: the quantized
    # products are the integers' own, so the reference is exact.
    rng = np.random.default_rng(4)
    lhs = rng.integers(-15, 16, (8, 256)).astype(np.float32)
    rhs = rng.integers(-15, 16, (256, 4)).astype(np.float32)
    cotangent = rng.integers(-4, 5, (8, 4)).astype(np.float32)
    rule = Accumulation("bfloat16", 0)
    meta = jnp.zeros((3, 5), jnp.float32)

    def float8(a, b):
        return float8_matmul(a, b, meta, "none", rule)

    out, pullback = jax.vjp(float8, lhs, rhs)
    d_lhs, d_rhs = pullback(jnp.asarray(cotangent))
    np.testing.assert_array_equal(np.asarray(out), reference_accumulate(lhs, rhs, 8, 0))
    np.testing.assert_array_equal(np.asarray(d_lhs), reference_accumulate(cotangent, rhs.T, 8, 0))
    np.testing.assert_array_equal(np.asarray(d_rhs), reference_accumulate(lhs.T, cotangent, 8, 0))
    numbers = (((1,), (0,)), ((), ()))
    mxfp8 = block_dot_general(lhs, rhs, numbers, meta=empty_meta(), recipe=MXFP8, accumulation=rule)
    np.testing.assert_array_equal(np.asarray(mxfp8), reference_accumulate(lhs, rhs, 8, 0))
    assert not np.array_equal(np.asarray(mxfp8), lhs.astype(np.float64) @ rhs)
