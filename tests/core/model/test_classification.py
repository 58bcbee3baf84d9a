"""The classification task's data and loss, and the norm setting's refusal for the linear model."""

from __future__ import annotations

import numpy as np
import pytest

from playground.core.data.synthetic import class_targets, make_batch
from playground.core.settings.settings import ConfigError, StepConfig
from playground.core.step.report import run_report


def test_labels_are_the_teachers_class_drawn_from_the_data_seed():
    config = StepConfig(n=50, d_in=6, d_out=4, task="classification", data_seed=3)
    x, y = make_batch(config)
    # The same draws as the regression data, in the same order (written out here).
    rng = np.random.default_rng(3)
    z = rng.standard_normal((50, 6), dtype=np.float32)
    teacher = rng.standard_normal((6, 4), dtype=np.float32) / np.float32(np.sqrt(6))
    noise = rng.standard_normal((50, 4), dtype=np.float32) * np.float32(0.1)
    labels = np.argmax(z @ teacher + noise, axis=-1)
    np.testing.assert_array_equal(y, np.eye(4, dtype=np.float32)[labels])
    np.testing.assert_array_equal(x, z)
    # The regression batch of the same seed is unchanged by the task's existence.
    _, regression = make_batch(config.replace(task="regression"))
    np.testing.assert_allclose(regression, z @ teacher + noise, rtol=1e-6)


def test_the_float32_twin_computes_the_softmax_cross_entropy():
    config = StepConfig(n=40, d_in=5, d_out=3, task="classification", input_scale=2.0, lr=0.0)
    report = run_report(config)
    x, y = make_batch(config)
    logits = x.astype(np.float64) @ report.kernel.before + report.bias.before
    shifted = logits - logits.max(-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    expected = -np.mean((y * log_softmax).sum(-1))
    assert report.float32_initial_loss == pytest.approx(expected, rel=1e-5)
    assert report.mixed_initial_loss_in_float32 == pytest.approx(expected, rel=1e-2)


def test_logits_grow_with_the_input_scale_until_float16_cannot_hold_them():
    base = StepConfig(n=64, d_in=16, d_out=4, task="classification", compute_dtype="float16")
    small, large = run_report(base), run_report(base.replace(input_scale=2.0**15))
    assert small.first_nonfinite["forward"] is None
    # 2^15 x entries of order 1 times weights of order 1/4: some logits pass 65504.
    x, _ = make_batch(base.replace(input_scale=2.0**15))
    logits = x.astype(np.float64) @ large.kernel.before + large.bias.before
    assert np.abs(logits).max() > np.finfo(np.float16).max
    assert large.first_nonfinite["forward"] == "dense"


def test_a_norm_is_refused_for_the_linear_model_by_name():
    with pytest.raises(ConfigError, match=r"norm \(normalisation\) must be none for the linear"):
        StepConfig(norm="layernorm")
    with pytest.raises(ConfigError, match=r"task \(task\) must be one of regression, class"):
        StepConfig(task="ranking")
    policy_choices = r"precision_policy \(precision per operation\) must be one of exercise, auto"
    with pytest.raises(ConfigError, match=policy_choices):
        StepConfig(precision_policy="float32")
    assert StepConfig(model="mlp", norm="layernorm").model_choice.norm == "layernorm"


def test_an_uploaded_class_column_becomes_one_hot_rows_or_is_refused_by_row():
    np.testing.assert_array_equal(
        class_targets(np.array([2.0, 0.0, 1.0]), 3),
        [[0, 0, 1], [1, 0, 0], [0, 1, 0]],
    )
    with pytest.raises(ConfigError, match=r"whole number in \[0, 2\].*row 2 has 1.5"):
        class_targets(np.array([0.0, 1.5]), 3)
    with pytest.raises(ConfigError, match="row 1 has 3"):
        class_targets(np.array([3.0]), 3)
