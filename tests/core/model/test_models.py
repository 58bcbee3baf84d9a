"""The models issue's demonstrations, each with its number: float16 activation gradients that
flush and come back with a loss scale, and Adam breaking in pure float16 where the mixed run
(float32 optimizer state) keeps training. Then the model spec: each model's options, work and
file-name piece against counts written here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import reference
from playground import (
    StepConfig,
    dynamics_summary,
    make_batch,
    run_dynamics,
    run_report,
    summarize,
)
from playground.core.model.models import MODELS, ModelChoice, param_shapes
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.settings.settings import settings

# A 4-hidden-layer tanh MLP on tiny float16 data: the gradients shrink as they flow back.
DEEP_FLOAT16 = StepConfig(
    n=64,
    d_in=16,
    d_out=4,
    model="mlp",
    hidden_layers=4,
    hidden_width=32,
    activation="tanh",
    compute_dtype="float16",
    input_scale=2.0**-14,
    target_scale=2.0**-14,
    loss_scale=1.0,
)


def _zero_shares(config: StepConfig) -> list[float]:
    return [a["zero_share"] for a in summarize(run_report(config))["activations"]]


def test_activation_gradients_flush_in_float16_and_a_loss_scale_recovers_them():
    unscaled = _zero_shares(DEEP_FLOAT16)
    scaled = _zero_shares(DEEP_FLOAT16.replace(loss_scale=2.0**10))
    assert len(unscaled) == 4  # one entry per hidden layer, input side first
    assert min(unscaled) > 0.1, unscaled  # over a tenth of every layer is lost at S = 1
    assert max(scaled) < 0.01 * min(unscaled), scaled  # S = 2^10 brings back nearly all
    # The zeros are underflow, not structure: float32's twin has no zero parameter gradient.
    report = run_report(DEEP_FLOAT16)
    assert all(np.count_nonzero(p.float32_grads) == p.size for p in report.params.values())


def test_the_reading_counts_each_layer_s_zeros_and_blames_the_range_only_where_it_applies():
    """float16 activations: the zeros are the dtype's range running out; the same run with the
    activations kept in float32 (``all_float32_but_matmul``) is not told so."""
    for policy, held in (("exercise", "float16"), ("all_float32_but_matmul", "float32")):
        report = run_report(DEEP_FLOAT16.replace(precision_policy=policy))
        sentences = summarize(report)["reading"]
        assert any(layer.zero_count for layer in report.activations), policy
        for layer in report.activations:
            if not layer.zero_count:
                continue
            share = 100 * layer.zero_count / layer.size
            sentence = next(
                text
                for text in sentences
                if f"{layer.zero_count:,} of the {layer.size:,} activation-gradient entries of "
                f"hidden layer {layer.layer + 1} ({share:.3g}%)" in text
            )
            assert ("shrank below its range" in sentence) == (held == "float16"), sentence
            assert f"in {held}" in sentence


def test_activation_histogram_counts_every_entry_of_every_layer():
    report = run_report(DEEP_FLOAT16.replace(loss_scale=2.0**10))
    for activation in summarize(report)["activations"]:
        counted = sum(activation["log2_histogram"]["counts"])
        counted += activation["zero_count"] + activation["nonfinite_count"]
        assert counted == activation["size"] == 64 * 32


# The initial weights (model seed) for which Adam breaks the pure float16 run; with seed 2 the
# same run trains (the first update's inf needs a small gradient entry, see below).
ADAM_SEED, ADAM_SAFE_SEED = 0, 2
ADAM = StepConfig(
    model_seed=ADAM_SEED, n=64, d_in=16, d_out=4, lr=1e-2, optimizer="adam", compute_dtype="float16"
)


def first_adam_update(config: StepConfig, eps: float) -> np.ndarray:
    """The pure float16 run's first Adam update, recomputed in numpy float16: the float64
    gradient at the float16 parameters and data, rounded to float16, then optax.adam's first
    step (b1 = 0.9, b2 = 0.999, both moments from zero, bias-corrected), every operation in
    float16 as the run's state and gradient are."""
    x, y = (reference.rounded(a, "float16") for a in make_batch(config))
    kernel, bias = (
        reference.rounded(p, "float16")
        for p in reference.initial_params(config.model_seed, config.d_in, config.d_out)
    )
    d_prediction = 2 * (x @ kernel + bias - y) / y.size
    grads = np.concatenate([(x.T @ d_prediction).ravel(), d_prediction.sum(axis=0)])
    g = grads.astype(np.float16)
    half = np.float16
    with np.errstate(all="ignore"):
        m_hat = (half(1 - 0.9) * g) / half(1 - 0.9)
        v_hat = (half(1 - 0.999) * (g * g)) / half(1 - 0.999)
        return -half(config.lr) * (m_hat / (np.sqrt(v_hat) + half(eps)))


def test_adam_fails_in_pure_float16_while_the_mixed_run_trains():
    dynamics = run_dynamics(ADAM, 100, "static", 100)
    json.dumps(dynamics_summary(dynamics), allow_nan=False)
    # The very first update breaks the pure run: its loss is finite before it and not after.
    assert np.isfinite(dynamics.pure_loss[0]) and not np.isfinite(dynamics.pure_loss[1])
    assert dynamics.mixed_loss[-1] < 0.5 * dynamics.mixed_loss[0]
    assert abs(dynamics.mixed_loss[-1] / dynamics.float32_loss[-1] - 1) < 0.01
    # The cause: for small gradient entries (1 - 0.999) g^2 underflows to 0 in float16, so
    # sqrt(v) + eps is eps alone, and optax's default eps (1e-8) is 0 in float16: m / 0 is inf.
    update = first_adam_update(ADAM, 1e-8)
    assert np.isinf(update).any()
    assert np.float16(1e-8) == 0
    # Any eps float16 stores as 0 or as its smallest subnormal (up to ~8.9e-8) fails the same way:
    # m / eps alone leaves float16's range (65504) before lr scales it down; 1e-7 does not.
    for eps in (3e-8, 8e-8):
        assert np.float16(eps) == np.finfo(np.float16).smallest_subnormal
        assert np.isinf(first_adam_update(ADAM, eps)).any(), eps
    assert np.isfinite(first_adam_update(ADAM, 1e-7)).all()


def test_adam_in_pure_float16_fails_only_for_some_initial_weights():
    safe = ADAM.replace(model_seed=ADAM_SAFE_SEED)
    # The float16 recomputation predicts which seed breaks; the run agrees.
    assert np.isfinite(first_adam_update(safe, 1e-8)).all()
    assert np.isfinite(run_dynamics(safe, 100, "static", 100).pure_loss).all()


def test_momentum_and_adam_run_through_the_step_with_real_updates():
    for optimizer in (name for name, spec in OPTIMIZERS.items() if spec.state_arrays):
        report = run_report(StepConfig(n=32, d_in=8, d_out=4, optimizer=optimizer))
        assert report.mixed_new_loss < report.mixed_initial_loss
        # The first Adam step moves every entry by about lr whatever the gradient's size.
        if optimizer == "adam":
            sizes = np.abs(report.kernel.updates)
            assert np.allclose(sizes, 0.1, rtol=1e-3), sizes


# The model spec: each registry entry says which settings apply to it, how much work one forward
# pass is (the unit of the work caps) and its piece of a download's file name.


def test_model_options_are_the_settings_each_model_reads():
    assert MODELS["linear"].options == ()
    assert MODELS["mlp"].options == ("hidden_layers", "hidden_width", "activation")
    for spec in MODELS.values():
        assert set(spec.options) <= set(settings())


@pytest.mark.parametrize("d_in, d_out", [(1, 1), (64, 16), (1024, 3)])
def test_linear_work_is_one_multiply_add_per_weight(d_in, d_out):
    choice = ModelChoice("linear", hidden_layers=5, hidden_width=7)  # MLP options are ignored
    assert MODELS["linear"].work(choice, d_in, d_out) == d_in * d_out


@pytest.mark.parametrize(
    "layers, width, d_in, d_out", [(1, 8, 3, 2), (2, 64, 64, 16), (4, 5, 7, 1)]
)
def test_mlp_work_counts_every_layer(layers, width, d_in, d_out):
    choice = ModelChoice("mlp", layers, width, "gelu")
    hand_count = d_in * width + (layers - 1) * width * width + width * d_out
    assert MODELS["mlp"].work(choice, d_in, d_out) == hand_count
    config = StepConfig(
        n=10, d_in=d_in, d_out=d_out, model="mlp", hidden_layers=layers, hidden_width=width
    )
    assert config.model_work == 10 * hand_count  # the unit the work caps count in


def test_model_work_matches_the_built_models_weights():
    # An independent count: the multiply-adds per row are the kernels' sizes.
    for choice in (ModelChoice(), ModelChoice("mlp", 3, 6, "tanh")):
        shapes = param_shapes(choice, 5, 4)
        kernels = sum(math.prod(shape) for name, shape in shapes.items() if name.endswith("kernel"))
        assert MODELS[choice.name].work(choice, 5, 4) == kernels


def test_slug_names_the_model_and_its_options():
    assert MODELS["linear"].slug(ModelChoice("linear", 3, 9, "tanh")) == "linear"
    assert MODELS["mlp"].slug(ModelChoice("mlp", 2, 64, "relu")) == "mlp2x64-relu"
    assert MODELS["mlp"].slug(ModelChoice("mlp", 8, 1024, "gelu")) == "mlp8x1024-gelu"


def test_options_of_another_model_are_reset_so_they_never_recompile_it():
    assert ModelChoice("linear", 5, 7, "tanh").normalized() == ModelChoice("linear")
    mlp = ModelChoice("mlp", 5, 7, "tanh")
    assert mlp.normalized() == mlp
    assert (ModelChoice("linear", 5).hidden_count, mlp.hidden_count) == (0, 5)
    with pytest.raises(ValueError, match="model must be one of linear, mlp"):
        ModelChoice("cnn").normalized()
