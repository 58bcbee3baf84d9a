"""The models issue's demonstrations, each with its number: float16 activation gradients that
flush and come back with a loss scale, and Adam breaking in pure float16 where the mixed run
(float32 optimizer state) keeps training. Then the model spec: each model's options, work and
file-name piece against counts written here."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from playground import StepConfig, dynamics_summary, run_dynamics, run_report, summarize
from playground.core.models import MODELS, ModelChoice, param_shapes
from playground.core.settings import settings

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


def test_activation_histogram_counts_every_entry_of_every_layer():
    report = run_report(DEEP_FLOAT16.replace(loss_scale=2.0**10))
    for activation in summarize(report)["activations"]:
        counted = sum(activation["log2_histogram"]["counts"])
        counted += activation["zero_count"] + activation["nonfinite_count"]
        assert counted == activation["size"] == 64 * 32


def test_adam_fails_in_pure_float16_while_the_mixed_run_trains():
    config = StepConfig(n=64, d_in=16, d_out=4, lr=1e-2, optimizer="adam", compute_dtype="float16")
    dynamics = run_dynamics(config, 100, "static", 100)
    summary = dynamics_summary(dynamics)
    json.dumps(summary, allow_nan=False)
    assert not np.isfinite(dynamics.pure_loss[-1])  # NaN or inf: the update divided by ~0
    assert dynamics.mixed_loss[-1] < 0.5 * dynamics.mixed_loss[0]
    assert abs(dynamics.mixed_loss[-1] / dynamics.float32_loss[-1] - 1) < 0.01
    # The cause, as the issue states it: float16 cannot hold Adam's eps or a small g^2 term.
    assert np.float16(1e-8) == 0
    assert np.float16((1 - 0.999) * np.float16(5e-3) ** 2) == 0


def test_momentum_and_adam_run_through_the_step_with_real_updates():
    for optimizer in ("momentum", "adam"):
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
    "layers, width, d_in, d_out", [(1, 8, 3, 2), (2, 64, 64, 16), (8, 5, 7, 1)]
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
