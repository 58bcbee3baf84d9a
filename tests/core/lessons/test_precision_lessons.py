"""Each precision lesson's condition holds on its own run, checked against numbers computed
here, and fails where its claim would not be true."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from playground.core.data.synthetic import make_batch
from playground.core.lessons import lesson as lesson_by_id
from playground.core.lessons.precision import step_loss_curve
from playground.core.step.report import run_report


def test_the_layer_norm_lesson_holds_and_its_overflow_is_real():
    lesson = lesson_by_id("layernorm-overflow")
    report = lesson.run()
    claim = lesson.claim(report)
    assert claim.holds, claim.condition
    # Independently: the first layer's outputs, squared in float16, overflow; in float32 not.
    x, _ = make_batch(report.config)
    kernel = report.params["layers.0.kernel"].before.astype(np.float64)
    bias = report.params["layers.0.bias"].before.astype(np.float64)
    outputs = (x.astype(np.float64) @ kernel + bias).astype(np.float16)
    with np.errstate(over="ignore"):
        assert np.isinf(outputs * outputs).any()
    assert np.isfinite(outputs.astype(np.float32) ** 2).all()


def test_the_layer_norm_lesson_is_not_taught_without_an_overflow():
    report = run_report(lesson_by_id("layernorm-overflow").config().replace(input_scale=1.0))
    assert report.first_nonfinite["forward"] is None
    assert not lesson_by_id("layernorm-overflow").claim(report).holds


def test_the_classification_lesson_holds_on_its_logits():
    lesson = lesson_by_id("classification-rounds")
    report = lesson.run()
    claim = lesson.claim(report)
    assert claim.holds, claim.condition
    low = report.mixed_initial_loss_in_compute_dtype
    high = report.mixed_initial_loss_in_float32

    # The float32 loss of the logits, recomputed here in float64 from bfloat16-rounded operands.
    def bf16(values):
        return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)

    x, y = make_batch(report.config)
    logits = bf16(bf16(x) @ bf16(report.kernel.before) + bf16(report.bias.before))
    shifted = logits - logits.max(-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    expected = -np.mean((y * log_softmax).sum(-1))
    assert abs(high - expected) <= 2e-3 * expected
    assert float(ml_dtypes.bfloat16(low)) == low and abs(low - high) >= 1e-3 * high


def test_the_loss_curve_lesson_holds_and_its_steps_are_bfloat16_values():
    lesson = lesson_by_id("bfloat16-loss-steps")
    claim = lesson.claim(lesson.run())
    assert claim.holds, claim.condition
    exercise = step_loss_curve(lesson.config())
    autocast = step_loss_curve(lesson.config().replace(precision_policy="autocast"))
    assert np.array_equal(exercise.astype(ml_dtypes.bfloat16).astype(np.float32), exercise)
    assert not np.array_equal(autocast.astype(ml_dtypes.bfloat16).astype(np.float32), autocast)
    assert (np.diff(exercise) <= 0).all() and (np.diff(autocast) < 0).all()
