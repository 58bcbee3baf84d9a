"""The transformer block (issue 36) against a float64 model written from its specification.

The block's float32 forward, loss and gradients against ``tests/transformer_reference.py``
(plain jax.numpy in float64, sequences cut one by one, no padding); the padding rule and
causality on the module itself; its operations and their dtypes per preset; the float16
attention overflow the exercise preset names and autocast keeps finite; the sequence targets
against a numpy loop; its settings' refusals; and one step of every recipe and optimizer. Shapes
are tiny and few: each new shape compiles.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import transformer_reference
from flax import nnx
from traced_step import traced_step

from playground.core.bounds import ConfigError
from playground.core.data.synthetic import NOISE_STD, make_batch
from playground.core.model.models import (
    MODELS,
    ModelChoice,
    build_model,
    param_arrays,
)
from playground.core.model.op_policy import PRESETS
from playground.core.model.optimizers import OPTIMIZERS, build_optimizer
from playground.core.recipes.registry import RECIPES
from playground.core.settings import cost
from playground.core.settings.settings import StepConfig
from playground.core.step.policy import FLOAT32_TWIN, Policy
from playground.core.step.report import run_report

D_IN, D_OUT = 4, 3
TINY = ModelChoice("transformer", hidden_width=8, seq_len=4, heads=2)
TINY_NORM = ModelChoice("transformer", hidden_width=8, norm="layernorm", seq_len=4, heads=2)


KEY_BIAS = "attention.key.bias"


def _batch(n=10, seed=0):
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((n, D_IN)).astype(np.float32),
        rng.standard_normal((n, D_OUT)).astype(np.float32),
    )


def _params(model) -> dict[str, np.ndarray]:
    return {k: np.asarray(v) for k, v in param_arrays(nnx.state(model, nnx.Param)).items()}


@pytest.mark.slow
@pytest.mark.parametrize("choice", [TINY, TINY_NORM], ids=["none", "layernorm"])
def test_float32_forward_loss_and_gradients_match_the_float64_model(choice):
    x, y = _batch()  # 10 rows, sequences of 4: the last one has 2 tokens (padded inside)
    model = build_model(choice, D_IN, D_OUT, nnx.Rngs(1))
    graphdef, state = nnx.split(model)

    @jax.jit
    def run(state, x, y):
        def loss(state):
            return FLOAT32_TWIN.loss(nnx.merge(graphdef, state), x, y)

        value, grads = jax.value_and_grad(loss)(state)
        return nnx.merge(graphdef, state)(x), value, grads

    outputs, loss, grads = run(state, jnp.asarray(x), jnp.asarray(y))
    grads = {k: np.asarray(v, np.float64) for k, v in param_arrays(grads).items()}
    params = _params(model)
    options = dict(seq_len=choice.seq_len, heads=choice.heads, norm=choice.norm == "layernorm")
    with jax.enable_x64(True):
        reference = jax.jit(
            lambda p, x: transformer_reference.forward(
                p, x, dtype="float32", preset="exercise", **options
            )
        )
        want_out = reference(
            {k: jnp.asarray(v, jnp.float64) for k, v in params.items()},
            jnp.asarray(x, jnp.float64),
        )
    want_loss, want_grads = transformer_reference.loss_and_grads(params, x, y, **options)
    np.testing.assert_allclose(np.asarray(outputs), np.asarray(want_out), rtol=1e-5, atol=1e-6)
    assert float(loss) == pytest.approx(want_loss, rel=1e-5)
    assert set(grads) == set(want_grads)
    for name, want in want_grads.items():
        # The key's bias adds q . b_k to a whole row of scores, which the softmax ignores: its
        # gradient is 0 up to rounding, so it is held to the query bias's scale.
        scale = np.linalg.norm(want_grads["attention.query.bias"] if name == KEY_BIAS else want)
        error = np.linalg.norm(grads[name] - want) / scale
        assert error <= 1e-5, (name, error)


@pytest.mark.slow
def test_a_shorter_last_sequence_is_its_own_computation():
    x, _ = _batch()
    model = build_model(TINY, D_IN, D_OUT, nnx.Rngs(2))
    whole = np.asarray(model(jnp.asarray(x)))
    # Rows 8..9 are the last sequence (2 of seq_len 4 tokens): computed alone they are the same.
    alone = np.asarray(model(jnp.asarray(x[8:])))
    first = np.asarray(model(jnp.asarray(x[:8])))
    # Equal up to float32 rounding (another batch shape sums its products in another order); a
    # padded token reaching a real one would move these by the whole output's size.
    np.testing.assert_allclose(whole[8:], alone, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(whole[:8], first, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_a_later_token_changes_no_earlier_output():
    x, _ = _batch()
    model = build_model(TINY_NORM, D_IN, D_OUT, nnx.Rngs(3))
    before = np.asarray(model(jnp.asarray(x)))
    changed = x.copy()
    changed[5] += 10.0  # the second token of the second sequence (rows 4..7)
    after = np.asarray(model(jnp.asarray(changed)))
    np.testing.assert_array_equal(after[:5], before[:5])  # earlier tokens, and sequence 1
    np.testing.assert_array_equal(after[8:], before[8:])  # another sequence
    assert np.all(np.abs(after[5:8] - before[5:8]).max(axis=1) > 0)  # itself and later tokens


# The specification's operations (name, kind, parameter prefix), norm=layernorm.
SPEC_OPERATIONS = [
    ("embed", "matmul", "embed."),
    ("norms.0", "normalisation", "norms.0."),
    ("attention.query", "matmul", "attention.query."),
    ("attention.key", "matmul", "attention.key."),
    ("attention.value", "matmul", "attention.value."),
    ("attention scores", "attention", None),
    ("softmax", "attention", None),
    ("attention values", "attention", None),
    ("attention.out", "matmul", "attention.out."),
    ("norms.1", "normalisation", "norms.1."),
    ("mlp.gate", "matmul", "mlp.gate."),
    ("mlp.up", "matmul", "mlp.up."),
    ("swiglu", "activation", None),
    ("mlp.down", "matmul", "mlp.down."),
    ("readout", "matmul", "readout."),
]
# preset -> kinds in float32, from the specification (torch 2.13's CPU autocast for autocast).
SPEC_FLOAT32 = {
    "exercise": set(),
    "autocast": {"normalisation", "loss", "attention"},
    "all_float32_but_matmul": {"activation", "normalisation", "loss", "attention"},
}


def test_the_operations_and_their_dtypes_per_preset_are_the_specifications():
    spec = MODELS["transformer"]
    assert [tuple(op) for op in spec.operations(TINY_NORM)] == SPEC_OPERATIONS
    without = [op for op in SPEC_OPERATIONS if op[1] != "normalisation"]
    assert [tuple(op) for op in spec.operations(TINY)] == without
    assert set(PRESETS) == set(SPEC_FLOAT32)
    for name, float32_kinds in SPEC_FLOAT32.items():
        for low in ("bfloat16", "float16"):
            policy = Policy.of(low, precision_policy=name)
            for _, kind, _ in SPEC_OPERATIONS:
                want = "float32" if kind in float32_kinds else low
                assert policy.op_dtype(kind) == want, (name, kind)
    # The parameters the operations name are the model's, in the specification's creation order.
    model = build_model(TINY_NORM, D_IN, D_OUT, nnx.Rngs(0))
    prefixes = {prefix for _, _, prefix in SPEC_OPERATIONS if prefix}
    assert {name.rsplit(".", 1)[0] + "." for name in _params(model)} == prefixes


# The float16 attention overflow (norm = none): scores q.k / sqrt(d_head) grow as input_scale^2
# and pass 65504 from about 192 at this shape (the SwiGLU's silu(g) * u, also ~ scale^2, passes
# it from about 64, after the attention in the forward order); 256 leaves a margin.
OVERFLOW = dict(
    model="transformer",
    n=32,
    d_in=8,
    d_out=4,
    hidden_width=16,
    heads=1,
    seq_len=8,
    compute_dtype="float16",
    input_scale=256.0,
)


@pytest.mark.slow
def test_float16_attention_scores_overflow_under_exercise_and_not_under_autocast():
    exercise = run_report(StepConfig(**OVERFLOW))
    assert exercise.first_nonfinite["forward"] == "attention scores"
    rows = {row.name: row for row in exercise.operations}
    assert rows["attention scores"].dtype == "float16" and rows["attention.key"].forward_finite
    autocast = run_report(StepConfig(**OVERFLOW, precision_policy="autocast"))
    rows = {row.name: row for row in autocast.operations}
    for name in ("attention scores", "softmax", "attention values"):
        assert rows[name].forward_finite and rows[name].dtype == "float32", name
    # Autocast keeps the attention finite; the SwiGLU after it (low under torch's autocast
    # too) still overflows at this scale.
    assert autocast.first_nonfinite["forward"] == "swiglu"


def test_sequence_targets_are_the_teacher_of_the_running_mean():
    config = StepConfig(model="transformer", n=11, d_in=3, d_out=2, seq_len=4, hidden_width=8)
    x, y = make_batch(config)
    rng = np.random.default_rng(config.data_seed)  # today's draws, in today's order
    z = rng.standard_normal((11, 3), dtype=np.float32).astype(np.float64)
    teacher = rng.standard_normal((3, 2), dtype=np.float32).astype(np.float64) / np.sqrt(3)
    noise = rng.standard_normal((11, 2), dtype=np.float32).astype(np.float64) * NOISE_STD
    want = np.empty((11, 2))
    for row in range(11):
        start = row - row % 4
        want[row] = z[start : row + 1].mean(axis=0) @ teacher + noise[row]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(x, z.astype(np.float32))  # x is unchanged
    # Only the sequence model gets them: the MLP's targets stay z @ T + e.
    mlp_x, mlp_y = make_batch(config.replace(model="mlp"))
    np.testing.assert_allclose(mlp_y, z @ teacher + noise, rtol=1e-5, atol=1e-6)
    labels = make_batch(config.replace(task="classification"))[1]
    np.testing.assert_array_equal(labels.argmax(axis=1), want.argmax(axis=1))


def test_the_settings_refuse_what_does_not_fit():
    with pytest.raises(ConfigError, match=r"heads \(attention heads\) must divide hidden_width"):
        StepConfig(model="transformer", hidden_width=12, heads=5)
    with pytest.raises(ConfigError, match="1, 2, 3, 4, 6 fit; got 5") as refused:
        StepConfig(model="transformer", hidden_width=12, heads=5)
    assert refused.value.field == "heads"
    for field, value in (("seq_len", 0), ("seq_len", 65), ("heads", 9), ("heads", 0)):
        with pytest.raises(ConfigError, match=field):
            StepConfig(model="transformer", **{field: value})
    # The MLP does not read heads, so any head count in range is no refusal there.
    assert StepConfig(model="mlp", hidden_width=12, heads=5).model_choice.heads == 2
    # Too wide to fit in memory: refused on hidden_width, naming the widest that fits.
    with pytest.raises(ConfigError, match=r"a hidden width of at most \d+ fits") as wide:
        StepConfig(model="transformer", n=8, hidden_width=1024, d_in=8, d_out=4, heads=8)
    assert wide.value.field == "hidden_width"
    fits = int(str(wide.value).split("at most ")[1].split()[0])
    assert fits % 8 == 0
    StepConfig(model="transformer", n=8, hidden_width=fits, d_in=8, d_out=4, heads=8)
    with pytest.raises(ConfigError):
        StepConfig(model="transformer", n=8, hidden_width=fits + 8, d_in=8, d_out=4, heads=8)


def test_the_cost_model_counts_the_blocks_matmuls_and_attention():
    choice = ModelChoice("transformer", hidden_width=8, seq_len=4, heads=2)
    d, ff = 8, 16
    dense = D_IN * d + 4 * d * d + 2 * d * ff + ff * d + d * D_OUT
    assert MODELS["transformer"].work(choice, D_IN, D_OUT) == dense + 2 * 4 * d
    model = build_model(choice, D_IN, D_OUT, nnx.Rngs(0))
    entries = sum(v.size for v in _params(model).values())
    assert cost.parameter_entries(choice, D_IN, D_OUT) == entries
    normed = build_model(TINY_NORM, D_IN, D_OUT, nnx.Rngs(0))
    entries = sum(v.size for v in _params(normed).values())
    assert cost.parameter_entries(TINY_NORM, D_IN, D_OUT) == entries


# One step of every recipe, each optimizer at least once among them (each new program compiles
# for seconds; the optimizer acts on the float32 gradients whatever the recipe, and
# test_registries runs the transformer with every optimizer).
RECIPE_ROWS = [
    ("bfloat16", "adam"),
    ("float16", "momentum"),
    ("float8", "sgd"),
    ("mxfp8", "adam"),
    ("fp8_block", "adamw"),
    ("nvfp4", "sgd"),
]


def test_every_recipe_and_optimizer_has_a_row():
    assert {r for r, _ in RECIPE_ROWS} == set(RECIPES)
    assert {o for _, o in RECIPE_ROWS} == set(OPTIMIZERS)


@pytest.mark.slow
@pytest.mark.parametrize("recipe, optimizer", RECIPE_ROWS)
def test_one_step_of_every_recipe_is_finite_and_moves_every_parameter(recipe, optimizer):
    x, y = _batch(n=6)
    model = build_model(TINY, D_IN, D_OUT, nnx.Rngs(4))
    trace = traced_step(model, build_optimizer(optimizer, 0.01), x, y, 256.0, Policy.of(recipe))
    assert np.isfinite(float(trace.initial_loss[0])) and np.isfinite(float(trace.new_loss[0]))
    assert list(trace.grads) == list(_params(model))
    for name, grad in trace.grads.items():
        assert np.all(np.isfinite(grad)), name
        if name != KEY_BIAS:  # its gradient is 0 up to rounding (see above)
            moved = trace.params_after[name] != trace.params_before[name]
            assert moved.any(), name
