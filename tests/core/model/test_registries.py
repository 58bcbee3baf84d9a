"""The contract every registry member keeps (as optax's common test does for its optimizers).

Every registered model (the MLP with each activation, the transformer block) x optimizer x
compute recipe runs through the general step, and each
result is checked against a computation written here: float64 numpy forward and backward passes
with each recipe's roundings, and each optimizer's update rule in float64. Adding a model, an
optimizer or a recipe without its reference here fails ``test_every_member_has_a_reference``.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
import op_reference
import pytest
import transformer_reference
from block_reference import reference_quantize
from flax import nnx
from traced_step import PARAM_FIELDS, traced_step

import reference
from helpers import covering_params
from playground.core.model.losses import TASKS
from playground.core.model.models import (
    ACTIVATIONS,
    MODELS,
    NORMS,
    ModelChoice,
    build_model,
    param_shapes,
)
from playground.core.model.op_policy import PRESETS
from playground.core.model.optimizers import OPTIMIZERS, WEIGHT_DECAY, build_optimizer
from playground.core.recipes.block_formats import BLOCK_RECIPES
from playground.core.recipes.registry import RECIPES
from playground.core.step.operations_report import step_operations
from playground.core.step.policy import FLOAT32_TWIN, Policy

LR, LOSS_SCALE, SEED = 0.1, 256.0, 3
SHAPE = (32, 8, 4)


def linear_reference(params, x, y, dtype):
    """(loss, {name: gradient}) of the exercise's linear layer, float64 at rounded values."""
    kernel, bias = params["kernel"], params["bias"]
    kernel_grad, bias_grad = reference.grads(kernel, bias, x, y, dtype)
    return reference.loss(kernel, bias, x, y, dtype), {"kernel": kernel_grad, "bias": bias_grad}


GELU_C = np.sqrt(2 / np.pi)
# activation -> (f, f') in float64; gelu is jax.nn.gelu's default, the tanh approximation.
ACTIVATION_REFERENCES = {
    "relu": (lambda z: np.maximum(z, 0), lambda z: (z > 0).astype(np.float64)),
    "tanh": (np.tanh, lambda z: 1 - np.tanh(z) ** 2),
    "gelu": (
        lambda z: 0.5 * z * (1 + np.tanh(GELU_C * (z + 0.044715 * z**3))),
        lambda z: (
            0.5 * (1 + np.tanh(GELU_C * (z + 0.044715 * z**3)))
            + 0.5
            * z
            * (1 - np.tanh(GELU_C * (z + 0.044715 * z**3)) ** 2)
            * GELU_C
            * (1 + 3 * 0.044715 * z**2)
        ),
    ),
}


def mlp_reference(activation):
    """(loss, grads) of the MLP: every layer's output, and every activation, rounded to the
    compute dtype on the way forward; exact float64 backpropagation at those values."""
    act, act_grad = ACTIVATION_REFERENCES[activation]

    def run(params, x, y, dtype):
        r = functools.partial(reference.rounded, dtype=dtype)
        layers = sorted({name.rsplit(".", 1)[0] for name in params}, key=lambda n: int(n[7:]))
        inputs, pre = [r(x)], []
        for index, layer in enumerate(layers):
            z = r(inputs[-1] @ r(params[f"{layer}.kernel"]) + r(params[f"{layer}.bias"]))
            pre.append(z)
            inputs.append(r(act(z)) if index < len(layers) - 1 else z)
        residual = inputs[-1] - r(y)
        loss = float(r(np.mean(residual**2)))
        delta = 2 * residual / residual.size
        grads = {}
        for index in reversed(range(len(layers))):
            if index < len(layers) - 1:
                delta = delta * act_grad(pre[index])
            grads[f"{layers[index]}.kernel"] = inputs[index].T @ delta
            grads[f"{layers[index]}.bias"] = delta.sum(axis=0)
            delta = delta @ r(params[f"{layers[index]}.kernel"]).T
        return loss, grads

    return run


def adam_first_step(grads, lr, params=None, b1=0.9, b2=0.999, eps=1e-8):
    """optax.adam's first update from zero moments, bias-corrected: -lr g / (|g| + eps)."""
    update = {}
    for name, g in grads.items():
        mu_hat = (1 - b1) * g / (1 - b1)
        nu_hat = (1 - b2) * g**2 / (1 - b2)
        update[name] = -lr * mu_hat / (np.sqrt(nu_hat) + eps)
    return update


def adamw_first_step(grads, lr, params):
    """optax.adamw's first update: Adam's, plus the decoupled decay, -lr (adam + wd p)."""
    adam = adam_first_step(grads, lr)
    return {name: adam[name] - lr * WEIGHT_DECAY * params[name] for name in grads}


def block_reference_of(choice):
    """(loss, grads) of the transformer block: tests/transformer_reference.py's float64 model,
    every operation rounded to the compute dtype (the exercise preset)."""

    def run(params, x, y, dtype):
        return transformer_reference.loss_and_grads(
            params,
            x,
            y,
            dtype=dtype,
            seq_len=choice.seq_len,
            heads=choice.heads,
            norm=choice.norm == "layernorm",
        )

    return run


CHOICES = {
    "linear": ModelChoice(),
    "mlp-relu": ModelChoice("mlp", 2, 8, "relu"),
    "mlp-gelu": ModelChoice("mlp", 1, 8, "gelu"),
    "mlp-tanh": ModelChoice("mlp", 2, 8, "tanh"),
    # 32 rows in sequences of 5: the last one has 2 tokens.
    "transformer": ModelChoice("transformer", hidden_width=8, seq_len=5, heads=2),
}
REFERENCE_MODELS = {
    "linear": lambda choice: linear_reference,
    "mlp": lambda choice: mlp_reference(choice.activation),
    "transformer": block_reference_of,
}
# The transformer's programs compile for seconds each: it runs every optimizer in the float32
# twin and one in each plain low-precision recipe (tests/core/model/test_transformer.py steps it in
# every recipe).
FEWER = {"transformer": "adam"}
# The attention's key bias adds q . b_k to a whole row of scores, which the softmax ignores: its
# gradient is 0 up to rounding, so its error is held to the query bias's gradient.
HELD_TO = {"attention.key.bias": "attention.query.bias"}
# Each: (grads, lr, params before the step) -> the first update, in float64.
REFERENCE_OPTIMIZERS = {
    "sgd": lambda grads, lr, params: {k: -lr * g for k, g in grads.items()},
    # The first step from a zero trace: trace = g, so the update is SGD's.
    "momentum": lambda grads, lr, params: {k: -lr * g for k, g in grads.items()},
    "adam": adam_first_step,
    "adamw": adamw_first_step,
}


def plain_reference(dtype: str) -> Callable:
    """A plain cast recipe's reference: (choice, params, x, y, scaling) -> (loss, grads), every
    value rounded to ``dtype`` where the exercise casts it (``scaling`` takes no part)."""

    def run(choice, params, x, y, scaling):
        del scaling
        return REFERENCE_MODELS[choice.name](choice)(params, x, y, dtype)

    return run


def float8_reference(choice, params, x, y, scaling):
    """The float8 recipe's reference: E4M3 operands forward, E5M2 gradients, per-tensor scales,
    rounded with ml_dtypes (``reference.float8_model``)."""
    activation = ACTIVATION_REFERENCES[choice.activation] if choice.name == "mlp" else None
    return reference.float8_model(params, x, y, activation, scaling, LOSS_SCALE)


def block_reference(name: str) -> Callable:
    """A block-scaled recipe's reference (the linear model): x and the kernel quantized block by
    block as the recipe stores them (``test_block_matmul.reference_quantize``: ml_dtypes for the
    formats), products and the loss in float64; the kernel's gradient x_q^T g_q / S from the
    scaled gradient g (S x dMSE/dout) quantized in blocks down the batch. A recipe that rounds
    gradients stochastically is compared with the expectation of that rounding, g itself (its
    draws come from the step's own gradient), and a Hadamard rotation is orthogonal, so the
    reference leaves it out; the bias's gradient is g's column sums / S (outside the matmul)."""
    spec = BLOCK_RECIPES[name]

    def run(choice, params, x, y, scaling):
        del choice, scaling  # the linear model only; a block recipe takes no fp8_scaling
        (n, k), m, b = x.shape, params["kernel"].shape[1], spec.block
        a = reference_quantize(x, (1, b), spec)[:n, :k].astype(np.float64)
        tile = spec.weight_tile or (b, 1)
        kernel = params["kernel"].astype(np.float32)
        w = reference_quantize(kernel, tile, spec)[:k, :m].astype(np.float64)
        residual = a @ w + params["bias"] - y
        g = LOSS_SCALE * 2 * residual / residual.size
        g_columns = g
        if not spec.stochastic_gradients:
            g_columns = reference_quantize(g.astype(np.float32), (b, 1), spec)[:n, :m]
        x_columns = reference_quantize(x, (b, 1), spec)[:n, :k].astype(np.float64)
        kernel_grad = x_columns.T @ g_columns.astype(np.float64) / LOSS_SCALE
        grads = {"kernel": kernel_grad, "bias": g.sum(axis=0) / LOSS_SCALE}
        return float(np.mean(residual**2)), grads

    return run


class RecipeReference(NamedTuple):
    """A recipe's float64 reference, the gradient error it allows (in norm, against that
    reference) and the rows it runs: (model, optimizer, fp8_scaling) each, or None for every
    model x optimizer; and whether its steps run compiled (``traced_step``) or op by op."""

    run: Callable
    grad_tolerance: float
    rows: tuple[tuple[str, str, str], ...] | None = None
    compiled: bool = True


# Gradient error allowed against the float64 model: a few ulps of the compute dtype per layer,
# in norm (the backward pass rounds at every layer). The float8 reference rounds exactly where
# the recipe does (ml_dtypes casts), so only float32 accumulation against float64 is left: a
# few 2^-24 per term over at most 8 terms. A float8 rounding that fell on the other side of a
# tie would cost 1/16 of an entry, far beyond it; none does at these seeds. float8 runs few rows,
# on the smallest models (each row is a few eager seconds), op by op: compiled unoptimized, its
# float32 sums come out in another order (the MLP's new loss 4.9e-7 off its reference, beyond the
# loss's 4 ulps); a fresh history's delayed scaling is scaling by 1, the same as none.
RECIPE_REFERENCES = {
    "bfloat16": RecipeReference(plain_reference("bfloat16"), 0.05),
    "float16": RecipeReference(plain_reference("float16"), 0.01),
    "float8": RecipeReference(
        float8_reference,
        1e-5,
        (("linear", "sgd", "none"), ("mlp-tanh", "momentum", "current")),
        compiled=False,
    ),
    # Block recipes round deterministically (round to nearest, float32 scales the same as the
    # reference's) but for NVFP4's gradient: its stochastic rounding errs by up to one E2M1 gap
    # per entry (a third of a block's largest value), with mean zero; over 32 rows it has
    # measured 0.09-0.11 of the gradient's norm, so 0.25 still fails a wrong scale or layout.
    "mxfp8": RecipeReference(block_reference("mxfp8"), 1e-5, (("linear", "sgd", None),)),
    "fp8_block": RecipeReference(block_reference("fp8_block"), 1e-5, (("linear", "adam", None),)),
    "nvfp4": RecipeReference(block_reference("nvfp4"), 0.25, (("linear", "momentum", None),)),
}
# The float32 twin, the reference of every recipe's comparison, runs through the same contract.
TWIN_REFERENCE = RecipeReference(plain_reference("float32"), 1e-4)


def _cases() -> list[tuple[str, str, Policy, RecipeReference]]:
    every = list(itertools.product(CHOICES, OPTIMIZERS))
    cases = [(c, o, FLOAT32_TWIN, TWIN_REFERENCE) for c, o in every]
    fewer = [(c, o) for c, o in every if FEWER.get(c, o) == o]
    for name, ref in RECIPE_REFERENCES.items():
        rows = ref.rows or [(c, o, None) for c, o in fewer]
        cases += [(c, o, Policy.of(name, scaling), ref) for c, o, scaling in rows]
    return cases


CASES = _cases()


def _case_id(case) -> str:
    choice, optimizer, policy, _ = case
    return "-".join([choice, optimizer, policy.compute.name, *filter(None, [policy.fp8_scaling])])


def test_every_member_has_a_reference():
    assert set(MODELS) == set(REFERENCE_MODELS) == {c.name for c in CHOICES.values()}
    assert (
        set(ACTIVATIONS)
        == set(ACTIVATION_REFERENCES)
        == {c.activation for c in CHOICES.values() if c.name == "mlp"}
    )
    assert set(OPTIMIZERS) == set(REFERENCE_OPTIMIZERS)
    assert set(RECIPE_REFERENCES) == set(RECIPES)
    assert {policy.compute.name for _, _, policy, _ in CASES} == {"float32", *RECIPES}


def _batch():
    n, d_in, d_out = SHAPE
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, d_in)).astype(np.float32)
    y = rng.standard_normal((n, d_out)).astype(np.float32)
    return x, y


def _members(case) -> tuple[str, ...]:
    """The registry members a case exercises: its model (and activation), optimizer, recipe."""
    choice, optimizer, policy, _ = case
    return (f"model {choice}", f"optimizer {optimizer}", f"recipe {policy.compute.name}")


# The quick tier steps each model, optimizer and recipe once; the full tier every case.
@pytest.fixture(scope="module", params=covering_params(CASES, _members, _case_id))
def case(request):
    choice_name, optimizer_name, policy, ref = request.param
    choice = CHOICES[choice_name]
    x, y = _batch()
    model = build_model(choice, SHAPE[1], SHAPE[2], nnx.Rngs(SEED))
    tx = build_optimizer(optimizer_name, LR)
    trace = traced_step(model, tx, x, y, LOSS_SCALE, policy, compiled=ref.compiled)
    numpy_trace = {field: getattr(trace, field) for field in PARAM_FIELDS}
    return choice, optimizer_name, policy, ref, x, y, trace.new_loss, numpy_trace


def test_parameters_are_named_by_path_with_the_model_shapes(case):
    choice, *_, numpy_trace = case
    shapes = param_shapes(choice, SHAPE[1], SHAPE[2])
    for field, params in numpy_trace.items():
        assert list(params) == list(shapes), field
        assert all(params[k].shape == shapes[k] for k in shapes)
        assert all(a.dtype == np.float32 for a in params.values()), field


def test_gradients_match_the_float64_model(case):
    choice, _, policy, ref, x, y, _, numpy_trace = case
    before = {k: v.astype(np.float64) for k, v in numpy_trace["params_before"].items()}
    _, expected = ref.run(choice, before, x, y, policy.fp8_scaling)
    for name, want in expected.items():
        got = numpy_trace["grads"][name].astype(np.float64)
        scale = np.linalg.norm(expected[HELD_TO.get(name, name)])
        assert np.linalg.norm(got - want) <= ref.grad_tolerance * scale, name
        scaled = numpy_trace["scaled_grads"][name]
        # The scaled gradients are what the low-precision backward pass produced: exact in a
        # plain cast's dtype (float8's are float32 sums of E5M2 x E4M3 products, exact in no
        # float8 format).
        plain = policy.compute.plain_dtype
        if plain is not None:
            assert np.array_equal(reference.rounded(scaled, plain), scaled.astype(np.float64))
        np.testing.assert_array_equal(numpy_trace["grads"][name], scaled / np.float32(LOSS_SCALE))


def test_updates_are_the_optimizers_own_and_land_on_the_float32_masters(case):
    _, optimizer_name, *_, numpy_trace = case
    grads = {k: v.astype(np.float64) for k, v in numpy_trace["grads"].items()}
    before = {k: v.astype(np.float64) for k, v in numpy_trace["params_before"].items()}
    expected = REFERENCE_OPTIMIZERS[optimizer_name](grads, LR, before)
    for name, want in expected.items():
        update = numpy_trace["updates"][name]
        # float32 arithmetic; Adam's bias correction divides by 1 - 0.999 rounded in float32,
        # which is 1.3e-5 away from 0.001: a few 1e-6 off the float64 rule.
        np.testing.assert_allclose(update, want, rtol=2e-5, atol=1e-30)
        sum32 = numpy_trace["params_before"][name] + update  # one float32 rounding
        np.testing.assert_array_equal(numpy_trace["params_after"][name], sum32)


def test_new_loss_is_the_models_loss_after_the_update(case):
    choice, _, policy, ref, x, y, new_loss, numpy_trace = case
    after = {k: v.astype(np.float64) for k, v in numpy_trace["params_after"].items()}
    expected_loss, _ = ref.run(choice, after, x, y, policy.fp8_scaling)
    # A loss in the compute dtype is within a few of its ulps; float8's loss is float32. Beside
    # them, every operation on the loss's path sums in float32 in an order XLA picks for the
    # processor (AVX-512's wider vectors: the float32 transformer's loss 4.9 ulps off float64
    # there, under 4 on AVX2), so an ulp of float32 per operation is allowed too.
    eps = float(jnp.finfo(jnp.dtype(policy.loss_dtype)).eps)
    path = len(step_operations(choice, TASKS[0]))
    rel = 4 * eps + path * float(jnp.finfo(jnp.float32).eps)
    assert float(new_loss[0]) == pytest.approx(expected_loss, rel=rel)
    assert new_loss.shape == (1,) and new_loss.dtype == jnp.float32


# Precision per operation: every preset, both tasks and the layer norm against the float64
# model of tests/op_reference.py (each operation rounded to its kind's dtype).
OP_CHOICES = {
    "linear": ModelChoice(),
    "mlp-tanh-layernorm": ModelChoice("mlp", 2, 8, "tanh", "layernorm"),
    "mlp-gelu-layernorm": ModelChoice("mlp", 1, 8, "gelu", "layernorm"),
    "mlp-relu": ModelChoice("mlp", 1, 8, "relu"),
}
# Smooth activations after a norm: relu's kink at 0 would turn a normalised value that rounds
# to the other side of 0 into a whole row's gradient (a 35% error on one entry was seen).
OP_ROWS = (
    ("mlp-tanh-layernorm", "bfloat16", "regression"),
    ("mlp-gelu-layernorm", "float16", "classification"),
    ("linear", "bfloat16", "classification"),
    ("mlp-relu", "float16", "regression"),
)
OP_CASES = [(preset, *row) for preset in op_reference.FLOAT32_KINDS for row in OP_ROWS] + [
    ("exercise", "mlp-tanh-layernorm", "float32", "classification")
]
GRAD_TOLERANCE = {"bfloat16": 0.05, "float16": 0.01, "float32": 1e-4}


def test_every_preset_task_and_norm_has_a_reference():
    assert set(PRESETS) == set(op_reference.FLOAT32_KINDS)
    assert {task for *_, task in OP_CASES} == set(TASKS)
    assert {OP_CHOICES[name].norm for _, name, _, _ in OP_CASES} == set(NORMS)


def _one_hot_batch():
    x, _ = _batch()
    labels = np.random.default_rng(5).integers(0, SHAPE[2], SHAPE[0])
    return x, np.eye(SHAPE[2], dtype=np.float32)[labels]


@pytest.mark.parametrize("preset, choice_name, dtype, task", OP_CASES)
def test_each_preset_task_and_norm_match_the_float64_model(preset, choice_name, dtype, task):
    choice = OP_CHOICES[choice_name]
    x, y = _one_hot_batch() if task == "classification" else _batch()
    if dtype == "float32":
        policy = dataclasses.replace(FLOAT32_TWIN, task=task)
    else:
        policy = Policy.of(dtype, precision_policy=preset, task=task)
    model = build_model(choice, SHAPE[1], SHAPE[2], nnx.Rngs(SEED))
    trace = traced_step(model, build_optimizer("sgd", LR), x, y, LOSS_SCALE, policy)
    before = {k: v.astype(np.float64) for k, v in trace.params_before.items()}
    activation = ACTIVATION_REFERENCES[choice.activation] if choice.name != "linear" else None
    loss, expected = op_reference.step_reference(
        before,
        x,
        y,
        dtype=dtype,
        preset=preset,
        task=task,
        activation=activation,
        hidden=choice.hidden_layers if choice.name != "linear" else 0,
        norm=choice.norm == "layernorm",
    )
    assert set(expected) == set(trace.grads)
    for name, want in expected.items():
        got = trace.grads[name].astype(np.float64)
        error = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert error <= GRAD_TOLERANCE[dtype], (name, error)
    # Within a few ulps of the compute dtype, whose rounding of the outputs the loss inherits in
    # any preset (test_op_policy checks which dtype the loss itself is computed in).
    eps = float(jnp.finfo(jnp.dtype(dtype)).eps)
    assert float(trace.initial_loss[0]) == pytest.approx(loss, rel=8 * eps)
