"""Precision per operation: the presets, the backward tap, the first non-finite operation on
constructed cases, and the loss computed in both dtypes."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from traced_step import UNOPTIMIZED

from playground.core.data.synthetic import make_batch
from playground.core.model.models import MODELS, ModelChoice, build_model
from playground.core.model.op_policy import KINDS, PRESETS, preset, tap
from playground.core.model.optimizers import build_optimizer
from playground.core.settings.settings import StepConfig
from playground.core.step.loss_scale import StaticLossScale
from playground.core.step.operations_report import (
    LOSS_SCALE_OPERATION,
    OperationReport,
    first_nonfinite,
    step_operations,
)
from playground.core.step.policy import Policy
from playground.core.step.report import run_report
from playground.core.step.step import step_trace

SMALL = {"n": 32, "d_in": 8, "d_out": 4}


def test_presets_name_the_kinds_in_float32():
    table = {name: [PRESETS[name].dtype(kind, "bfloat16") for kind in KINDS] for name in PRESETS}
    assert table == {
        "exercise": ["bfloat16"] * 5,
        "autocast": ["bfloat16", "bfloat16", "float32", "float32", "float32"],
        "all_float32_but_matmul": ["bfloat16", "float32", "float32", "float32", "float32"],
    }
    with pytest.raises(ValueError, match="precision_policy must be one of exercise, autocast"):
        preset("fp32")


def test_tap_passes_values_and_flags_a_nonfinite_gradient():
    values = jnp.arange(3.0)

    def through(weights):
        return jax.grad(lambda flag: jnp.sum(tap(values, flag) * weights))(jnp.float32(0))

    assert float(through(jnp.ones(3))) == 0.0
    assert float(through(jnp.array([1.0, jnp.inf, 1.0]))) == 1.0
    assert float(through(jnp.array([jnp.nan, 1.0, 1.0]))) == 1.0
    np.testing.assert_array_equal(jax.jit(tap)(values, jnp.float32(0)), values)


WATCHED_FIELDS = ("initial_loss", "new_loss", "scaled_grads", "params_after", "forward_finite")


def _trace(choice, policy, x, y, scale=256.0, watch=0):
    """The step's WATCHED_FIELDS, compiled as the page runs it (op by op, each operation of the
    two steps compiled on its own, the three presets took 17 s of a cold CI run); unoptimized,
    as tests/traced_step.py explains, so each operation rounds its own result."""
    graphdef, state = nnx.split(build_model(choice, x.shape[1], y.shape[1], nnx.Rngs(0)))

    @functools.partial(jax.jit, compiler_options=UNOPTIMIZED)
    def run(state, x, y):
        trace = step_trace(
            nnx.merge(graphdef, state),
            build_optimizer("sgd", 0.1),
            x,
            y,
            StaticLossScale(jnp.float32(scale)),
            policy,
            hidden=choice.hidden_widths,
            watch=watch,
        )
        return {field: getattr(trace, field) for field in WATCHED_FIELDS}

    return run(state, jnp.asarray(x), jnp.asarray(y))


@pytest.mark.parametrize("policy_name", list(PRESETS))
def test_watching_changes_no_number(policy_name):
    choice = ModelChoice("mlp", 2, 8, "gelu", "layernorm")
    x, y = make_batch(StepConfig(**SMALL))
    policy = Policy.of("float16", precision_policy=policy_name)
    plain = _trace(choice, policy, x, y)
    watched = _trace(choice, policy, x, y, watch=len(step_operations(choice, "regression")))
    for field in WATCHED_FIELDS[:-1]:
        pairs = zip(jax.tree.leaves(plain[field]), jax.tree.leaves(watched[field]), strict=True)
        for a, b in pairs:
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert watched["forward_finite"].shape == (len(step_operations(choice, "regression")),)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_the_step_loss_is_the_one_in_the_presets_loss_dtype(task):
    config = StepConfig(**SMALL, task=task, input_scale=4.0)
    exercise = run_report(config)
    autocast = run_report(config.replace(precision_policy="autocast"))
    assert exercise.mixed_initial_loss == exercise.mixed_initial_loss_in_compute_dtype
    assert autocast.mixed_initial_loss == autocast.mixed_initial_loss_in_float32
    # The low-dtype loss is a bfloat16 number; the float32 one (of these logits) is not.
    low = exercise.mixed_initial_loss_in_compute_dtype
    high = exercise.mixed_initial_loss_in_float32
    assert float(ml_dtypes.bfloat16(low)) == low
    assert float(ml_dtypes.bfloat16(high)) != high
    # Both are the loss of the same outputs: apart by a few bfloat16 spacings (8 bits) at most.
    spacing = 2.0 ** (np.floor(np.log2(high)) - 7)
    assert abs(low - high) <= 4 * spacing


def _row(name, forward=True, gradient=True, params=True):
    return OperationReport(name, "matmul", "float16", forward, gradient, params)


def test_first_nonfinite_on_constructed_rows():
    clean = (_row("a"), _row("b"), _row("loss"))
    assert first_nonfinite(clean) == {"forward": None, "backward": None}
    rows = (_row("a"), _row("b", forward=False), _row("loss", forward=False))
    assert first_nonfinite(rows)["forward"] == "b"
    # The gradient arriving at a's result is made by b's backward.
    rows = (_row("a", gradient=False), _row("b"), _row("loss"))
    assert first_nonfinite(rows)["backward"] == "b"
    # a's own parameters' gradients come after b's products in backward order.
    rows = (_row("a", params=False), _row("b", gradient=False), _row("loss"))
    assert first_nonfinite(rows)["backward"] == "loss"
    rows = (_row("a", params=False), _row("b"), _row("loss", gradient=False))
    assert first_nonfinite(rows)["backward"] == LOSS_SCALE_OPERATION


def test_an_input_beyond_float16_names_the_first_matmul():
    config = StepConfig(**SMALL, compute_dtype="float16", input_scale=2.0**16)
    x, _ = make_batch(config)
    with np.errstate(over="ignore"):
        assert np.isinf(x.astype(np.float16)).any()  # the cast input is already inf
    report = run_report(config)
    assert report.first_nonfinite["forward"] == MODELS["linear"].operations(ModelChoice())[0].name


def test_a_scale_beyond_float16_names_the_loss_scale():
    report = run_report(StepConfig(**SMALL, compute_dtype="float16", loss_scale=2.0**16))
    assert float(np.finfo(np.float16).max) < 2.0**16
    assert report.first_nonfinite == {"forward": None, "backward": LOSS_SCALE_OPERATION}


def test_a_float16_layer_norm_overflow_is_named_in_the_table():
    config = StepConfig(
        **SMALL,
        model="mlp",
        hidden_layers=1,
        hidden_width=16,
        norm="layernorm",
        compute_dtype="float16",
        input_scale=1024.0,
    )
    report = run_report(config)
    kinds = {row.name: row.kind for row in report.operations}
    assert kinds[report.first_nonfinite["forward"]] == "normalisation"
    assert [row.dtype for row in report.operations] == ["float16"] * len(report.operations)
    autocast = run_report(config.replace(precision_policy="autocast"))
    assert {row.kind: row.dtype for row in autocast.operations} == {
        "matmul": "float16",
        "normalisation": "float32",
        "activation": "float16",
        "loss": "float32",
    }
    assert autocast.first_nonfinite == {"forward": None, "backward": None}
