"""The models issue's demonstrations, each with its number: float16 activation gradients that
flush and come back with a loss scale, and Adam breaking in pure float16 where the mixed run
(float32 optimizer state) keeps training."""

from __future__ import annotations

import json

import numpy as np

from playground import StepConfig, dynamics_summary, run_dynamics, run_report, summarize

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
