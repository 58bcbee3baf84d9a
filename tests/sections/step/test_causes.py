"""The causes name the first operation whose forward result overflowed, and blame the loss scale
only when the forward pass was finite and the scaled gradients were not: both checked against a
float64 numpy forward pass that rounds each value to float16 where the step holds it."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import reference
from playground.core.data.synthetic import make_batch
from playground.core.model.losses import LOSS_NAMES
from playground.core.model.op_policy import KINDS
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.step.causes import WHY
from playground.sections.step.notes import histogram_note, loss_note
from playground.sections.step.summary import summarize

# The operations table's small MLP (tests/sections/step/test_operations.py): compiled once.
MLP = StepConfig(
    n=32,
    d_in=8,
    d_out=4,
    model="mlp",
    hidden_layers=1,
    hidden_width=16,
    norm="layernorm",
    compute_dtype="float16",
    loss_scale=1.0,
)
FLOAT16_MAX = float(np.finfo(np.float16).max)
EPSILON = 1e-6  # flax's LayerNorm default


def first_overflowing_operation(config: StepConfig) -> str | None:
    """The first operation of the float16 forward pass (the linear model's dense, or the MLP's
    layers.i, norms.i, relu i; then mse) whose float16 result is not finite, or None: float64
    arithmetic, every value rounded to float16 where the step holds it; a layer norm's variance
    is the mean of float16 squares minus the squared mean, each rounded; the MSE holds its
    squared residuals in float16."""
    x, y = make_batch(config)
    params = {name: p.before.astype(np.float64) for name, p in run_report(config).params.items()}
    if config.model == "linear":
        layers = [("dense", "")]
    else:
        layers = [(f"layers.{i}", f"layers.{i}.") for i in range(config.hidden_layers + 1)]

    def low(values):
        return reference.rounded(values, "float16")

    with np.errstate(over="ignore", invalid="ignore"):
        inputs = low(x)
        for index, (name, prefix) in enumerate(layers):
            kernel, bias = params[prefix + "kernel"], params[prefix + "bias"]
            z = low(inputs @ low(kernel) + low(bias))
            if not np.isfinite(z).all():
                return name
            if index == len(layers) - 1:
                break
            mean = low(z.mean(-1, keepdims=True))
            variance = low(np.maximum(0, low(low(z * z).mean(-1, keepdims=True)) - mean * mean))
            scale, bias = params[f"norms.{index}.scale"], params[f"norms.{index}.bias"]
            normalized = low((z - mean) / np.sqrt(variance + EPSILON) * low(scale) + low(bias))
            if not (np.isfinite(variance).all() and np.isfinite(normalized).all()):
                return f"norms.{index}"
            inputs = low(np.maximum(normalized, 0))  # relu cannot overflow
        if not np.isfinite(low(low(z - low(y)) ** 2)).all():  # the squared residuals
            return "mse"
    return None


# The linear model at the honest-numbers tests' float16 shape, its targets as large as its inputs.
LINEAR = StepConfig(n=32, d_in=8, d_out=4, compute_dtype="float16", loss_scale=1.0)
CASES = {
    **{f"mlp, x of 2^{e}": MLP.replace(input_scale=2.0**e) for e in (0, 9, 12, 17)},
    **{
        f"linear, x and y of 2^{e}": LINEAR.replace(input_scale=2.0**e, target_scale=2.0**e)
        for e in (7, 16)
    },
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_causes_name_the_operation_the_float64_model_overflows_first(case):
    config = CASES[case]
    expected = first_overflowing_operation(config)
    report = run_report(config)
    summary = summarize(report)
    failure = summary["forward_failure"]
    if expected is None:
        assert failure is None, failure
        assert "forward_overflow" not in summary["causes"], summary["causes"]
        return
    assert failure is not None and failure["operation"] == expected, (expected, failure)
    assert failure["dtype"] == "float16"
    assert f"past {FLOAT16_MAX:.6g}" in failure["why"], failure
    assert "forward_overflow" in summary["causes"], summary["causes"]
    # Neither the loss scale nor underflow is blamed for what a failed forward pass did.
    assert not {"scaled_gradient_overflow", "gradient_underflow"} & set(summary["causes"])
    sentence = next(s for s in summary["reading"] if "forward pass overflows" in s)
    assert f"first appears in {expected}, {failure['why']}" in sentence, sentence
    if not math.isfinite(report.mixed_new_loss):  # the loss chart's note says why it has no dot
        assert f"overflows in {expected}, {failure['why']}" in loss_note(report)


def test_the_issue_case_names_the_norms_variance_and_the_square_root_of_float16s_largest():
    config = MLP.replace(input_scale=512.0)
    assert first_overflowing_operation(config) == "norms.0"
    report = run_report(config)
    failure = summarize(report)["forward_failure"]
    assert failure["kind"] == "normalisation"
    assert failure["why"].startswith(f"a float16 variance past {FLOAT16_MAX:.6g}"), failure
    # |x| past the stated bound squares past float16's largest value; below it, it does not.
    bound = float(re.search(r"\|x\| passes ([0-9.]+)", failure["why"]).group(1))
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(np.float16(bound * 1.001) ** 2))
        assert np.isfinite(np.float16(np.float16(bound * 0.999) ** 2))
    assert "its forward pass failed in norms.0" in histogram_note(report), histogram_note(report)


def test_an_overflowing_scale_with_a_finite_forward_pass_is_the_scaled_gradients_overflow():
    config = MLP.replace(loss_scale=2.0**16)  # the lesson (docs/lessons.md): S past float16's range
    assert first_overflowing_operation(config) is None
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(config.loss_scale))
    summary = summarize(run_report(config))
    assert summary["forward_failure"] is None
    assert "scaled_gradient_overflow" in summary["causes"], summary["causes"]
    assert "forward_overflow" not in summary["causes"], summary["causes"]


def test_every_operation_kind_and_loss_has_a_reason_built_from_the_dtypes_largest_value():
    # forward_failure looks a failing operation's reason up by its kind (a loss by its name):
    # a kind a model brings without one would crash the page's reading of its run.
    keys = [kind for kind in KINDS if kind != "loss"] + list(LOSS_NAMES.values())
    for key in keys:
        assert f"past {FLOAT16_MAX:.6g}" in WHY[key]("float16", FLOAT16_MAX), key
    assert set(WHY) == set(keys)
