"""The precision policy and its recipe registry, checked against ml_dtypes casts.

Every recipe's declared formats are checked against what its policy computes: a layer whose
kernel is the identity (exact in every format) and whose bias is zero passes its input through
one matmul, so its output is exactly the input rounded to the forward format, and the gradient
it sends back is exactly the arriving gradient rounded to the gradient format. The expected
values are ml_dtypes / numpy casts, not the code under test.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx

import reference
from playground.core.recipes.float8 import AmaxHistory
from playground.core.recipes.registry import COMPUTE_DTYPES, RECIPES, recipe, recipe_summaries
from playground.core.settings.settings import StepConfig
from playground.core.step import compiled as compiled_programs
from playground.core.step.policy import EXERCISE, FLOAT32_TWIN, Policy, policy_for
from playground.core.step.report import _both_steps, run_report

WIDTH = 16
# Every format a recipe may name, as numpy types (ml_dtypes for the ones numpy lacks).
NUMPY_TYPES = (
    {name: np.dtype(t) for name, t in reference.DTYPES.items()}
    | {name: np.dtype(t) for name, t in reference.FLOAT8.items()}
    | {"float4_e2m1fn": np.dtype(ml_dtypes.float4_e2m1fn)}
)
# The recipes that round each operand as a whole (a block-scaled recipe's rounding depends on
# each block's scale: tests/core/recipes/test_block_matmul.py and test_registries.py check it).
PER_TENSOR = tuple(name for name in COMPUTE_DTYPES if recipe(name).block is None)
BLOCK = tuple(name for name in COMPUTE_DTYPES if recipe(name).block is not None)


def _rounded(values: np.ndarray, fmt: str) -> np.ndarray:
    """``values`` (float32) cast to ``fmt`` by numpy / ml_dtypes, as float64."""
    return np.asarray(values, np.float32).astype(NUMPY_TYPES[fmt]).astype(np.float64)


def _identity_layer() -> nnx.Linear:
    def identity(key, shape, dtype=jnp.float32):
        return jnp.eye(shape[0], shape[1], dtype=dtype)

    return nnx.Linear(WIDTH, WIDTH, kernel_init=identity, rngs=nnx.Rngs(0))


def _policy(name: str) -> Policy:
    """The recipe's policy with per-tensor scale 1 (``none``) where it takes a scaling."""
    return Policy.of(name, "none")


def _fresh_metas(policy: Policy) -> jax.Array | tuple:
    """A quantizing recipe's statistics rows for one matmul, carrying scale 1 (a fresh
    history's); nothing for a plain cast."""
    return AmaxHistory.fresh(1).metas() if policy.compute.quantizes else ()


def _values(fmt: str, seed: int) -> np.ndarray:
    """(8, WIDTH) float32 values across ``fmt``'s normal range, with float32's mantissas (so
    rounding them to ``fmt`` changes most of them)."""
    rng = np.random.default_rng(seed)
    facts = ml_dtypes.finfo(NUMPY_TYPES[fmt])
    low, high = np.log2(float(facts.smallest_normal)), min(np.log2(float(facts.max)) - 1.5, 40)
    magnitude = np.exp2(rng.uniform(low, high, (8, WIDTH))) * rng.uniform(1, 2, (8, WIDTH))
    return (magnitude * rng.choice([-1, 1], (8, WIDTH))).astype(np.float32)


def test_the_registry_is_the_compute_dtype_choices_in_order():
    assert tuple(RECIPES) == COMPUTE_DTYPES
    assert COMPUTE_DTYPES == ("bfloat16", "float16", "float8", "mxfp8", "fp8_block", "nvfp4")
    assert all(recipe(name).name == name for name in COMPUTE_DTYPES)


def test_an_unknown_recipe_names_the_field_and_the_choices():
    with pytest.raises(ValueError) as caught:
        recipe("float64")
    assert str(caught.value) == (
        "compute_dtype must be one of bfloat16, float16, float8, mxfp8, fp8_block, nvfp4; "
        "got 'float64'"
    )
    with pytest.raises(ValueError, match="compute_dtype must be one of"):
        Policy.of("int8")
    with pytest.raises(ValueError) as caught:
        Policy.of("float8", "sometimes")
    assert str(caught.value) == "fp8_scaling must be one of none, current, delayed; got 'sometimes'"


@pytest.mark.parametrize("name", PER_TENSOR)
def test_the_forward_pass_rounds_every_matmul_operand_to_the_forward_format(name):
    policy, chosen = _policy(name), recipe(name)
    x = _values(chosen.forward_format, seed=1)
    temporary = policy.temporary_model(_identity_layer(), _fresh_metas(policy))
    out = np.asarray(temporary(policy.cast_to_compute(jnp.asarray(x))).astype(jnp.float32))
    np.testing.assert_array_equal(out.astype(np.float64), _rounded(x, chosen.forward_format))


@pytest.mark.parametrize("name", PER_TENSOR)
def test_the_backward_pass_rounds_the_arriving_gradient_to_the_gradient_format(name):
    policy, chosen = _policy(name), recipe(name)
    x = jnp.asarray(_values(chosen.forward_format, seed=2))
    arriving = jnp.asarray(_values(chosen.gradient_format, seed=3))
    temporary = policy.temporary_model(_identity_layer(), _fresh_metas(policy))

    def through_the_layer(x):
        out = temporary(policy.cast_to_compute(x)).astype(jnp.float32)
        return jnp.sum(out * arriving)

    sent_back = np.asarray(jax.grad(through_the_layer)(x), np.float64)
    np.testing.assert_array_equal(sent_back, _rounded(arriving, chosen.gradient_format))


@pytest.mark.parametrize("name", PER_TENSOR)
def test_the_loss_is_computed_in_the_cast_dtype_and_returned_in_float32(name):
    policy = _policy(name)
    rng = np.random.default_rng(4)
    x, y = (rng.standard_normal((8, WIDTH)).astype(np.float32) for _ in range(2))
    loss = policy.loss(_identity_layer(), jnp.asarray(x), jnp.asarray(y), (), _fresh_metas(policy))
    assert loss.dtype == jnp.dtype(policy.loss_dtype)
    assert policy.cast_to_output(loss).dtype == jnp.float32
    prediction = _rounded(x, recipe(name).forward_format)
    # The data are cast to the recipe's cast dtype (float8: kept float32, its matmul rounds).
    expected = np.mean((prediction - _rounded(y, policy.loss_dtype)) ** 2)
    eps = float(ml_dtypes.finfo(NUMPY_TYPES[policy.loss_dtype]).eps)
    assert float(loss) == pytest.approx(expected, rel=4 * eps)


@pytest.mark.parametrize("name", PER_TENSOR)
def test_saturates_says_whether_a_value_past_the_format_becomes_its_largest(name):
    policy, chosen = _policy(name), recipe(name)
    largest = float(ml_dtypes.finfo(NUMPY_TYPES[chosen.forward_format]).max)
    with np.errstate(over="ignore"):
        past = np.float32(4 * largest)
    if not np.isfinite(past):  # bfloat16's range is float32's: nothing finite lies past it
        assert not chosen.saturates
        return
    x = np.full((1, WIDTH), past, np.float32)
    temporary = policy.temporary_model(_identity_layer(), _fresh_metas(policy))
    out = np.asarray(temporary(policy.cast_to_compute(jnp.asarray(x))).astype(jnp.float32))
    if chosen.saturates:
        assert np.all(out == largest)
    else:  # a plain cast: inf, or NaN in a format without one
        assert not np.any(np.isfinite(out))


@pytest.mark.parametrize("name", COMPUTE_DTYPES)
def test_without_masters_the_parameters_are_stored_in_the_forward_format(name):
    values = _values(recipe(name).forward_format, seed=5)
    stored = _policy(name).without_masters().cast_to_param(jnp.asarray(values))
    assert stored.dtype == NUMPY_TYPES[recipe(name).forward_format]
    np.testing.assert_array_equal(
        np.asarray(stored).astype(np.float64), _rounded(values, recipe(name).forward_format)
    )
    assert _policy(name).cast_to_param(jnp.asarray(values)).dtype == jnp.float32  # the masters


def test_plain_dtype_names_the_exercises_cast_and_none_for_a_scaled_recipe():
    plain = [recipe(name).plain_dtype for name in COMPUTE_DTYPES]
    assert plain == ["bfloat16", "float16", None, None, None, None]
    assert EXERCISE.compute.plain_dtype == "bfloat16" and FLOAT32_TWIN.loss_dtype == "float32"


def test_a_plain_recipe_ignores_fp8_scaling_so_its_programs_are_shared():
    plain = [Policy.of("bfloat16", scaling) for scaling in ("none", "current", "delayed")]
    assert len(set(plain)) == 1 and plain[0].fp8_scaling is None
    scaled = {Policy.of("float8", scaling) for scaling in ("none", "current", "delayed")}
    assert len(scaled) == 3
    config = StepConfig(n=16, d_in=4, d_out=2)
    assert policy_for(config.replace(fp8_scaling="delayed")) == policy_for(config) == EXERCISE


def test_changing_fp8_scaling_recompiles_only_a_float8_program(monkeypatch):
    # The bound on kept programs must not evict this test's programs mid-test.
    monkeypatch.setattr(compiled_programs, "MAX_PROGRAMS", 10**6)
    config = StepConfig(n=24, d_in=4, d_out=2)
    run_report(config)
    compiled = compiled_programs.compiles(_both_steps)
    for scaling in ("none", "delayed"):
        run_report(config.replace(fp8_scaling=scaling))
    assert compiled_programs.compiles(_both_steps) == compiled
    float8 = config.replace(compute_dtype="float8")
    run_report(float8)
    run_report(float8.replace(fp8_scaling="delayed"))
    assert compiled_programs.compiles(_both_steps) == compiled + 2


def test_every_recipe_summary_key_is_in_every_report():
    # The suite's common small shape: every recipe's report there is compiled once for the run.
    small = StepConfig(n=32, d_in=8, d_out=4)
    by_dtype = {
        name: recipe_summaries(run_report(small.replace(compute_dtype=name)))
        for name in COMPUTE_DTYPES
    }
    assert len({tuple(summary) for summary in by_dtype.values()}) == 1
    assert by_dtype["bfloat16"] == dict.fromkeys(("float8", *BLOCK), [])
    for name in BLOCK:  # each block recipe lists its own step's tensors, in its element format
        formats = {t["format"] for t in by_dtype[name][name]}
        assert formats == {recipe(name).forward_format}
        assert all(not tensors for other, tensors in by_dtype[name].items() if other != name)
    tensors = by_dtype["float8"]["float8"]
    assert [(t["role"], t["format"]) for t in tensors] == [
        ("input", "float8_e4m3fn"),
        ("kernel", "float8_e4m3fn"),
        ("gradient", "float8_e5m2"),
    ]
