"""An uploaded CSV under task=classification: its last column holds whole-number classes in
[0, D_out), whatever the header says, becomes one-hot targets, and a bad class is refused naming
its row and column as a spreadsheet counts them."""

from __future__ import annotations

import numpy as np
import pytest

from playground import StepConfig, run_report
from playground.core.data.user_data import parse_csv
from playground.core.settings.settings import ConfigError

RNG = np.random.default_rng(11)
INPUTS = RNG.standard_normal((30, 3)).round(4)
LABELS = RNG.integers(0, 4, 30)


def _csv(labels, header: str | None = "a,y,c,label") -> bytes:
    """INPUTS beside ``labels`` (cells as written), with ``header`` (or none)."""
    rows = [
        ",".join([*(repr(float(v)) for v in row), str(label)])
        for row, label in zip(INPUTS, labels, strict=True)
    ]
    return "\n".join(([header] if header else []) + rows).encode() + b"\n"


@pytest.mark.parametrize("header", ["a,y,c,label", None])
def test_the_last_column_becomes_one_hot_classes_and_the_rest_inputs(header):
    data = parse_csv(_csv(LABELS, header), d_out=5, task="classification")
    # A column headed y is an input here: the class is the last column, one per row.
    np.testing.assert_array_equal(data.x, INPUTS.astype(np.float32))
    np.testing.assert_array_equal(data.y, np.eye(5, dtype=np.float32)[LABELS])
    assert data.shapes() == {"n": 30, "d_in": 3, "d_out": 5}
    # The same file as a regression keeps its header's targets: the column headed y.
    regression = parse_csv(_csv(LABELS, header), d_out=1)
    target = INPUTS[:, 1:2] if header else LABELS[:, None]
    np.testing.assert_array_equal(regression.y, target.astype(np.float32))


def test_a_class_written_as_a_whole_float_is_that_class():
    labels = [f"{label}.0" for label in LABELS]
    data = parse_csv(_csv(labels), d_out=4, task="classification")
    np.testing.assert_array_equal(data.y.argmax(1), LABELS)


@pytest.mark.parametrize(
    ("cell", "header", "where"),
    [
        ("1.5", "a,b,c,label", "row 5, column 4 has 1.5"),  # row 5: the header is row 1
        ("-1", None, "row 4, column 4 has -1"),
        ("4", "a,b,c,label", "row 5, column 4 has 4"),  # classes 0..3 with D_out = 4
    ],
)
def test_a_bad_class_is_refused_naming_its_cell(cell, header, where):
    labels = [str(label) for label in LABELS]
    labels[3] = cell
    with pytest.raises(ConfigError) as caught:
        parse_csv(_csv(labels, header), d_out=4, task="classification")
    assert caught.value.field == "data"
    message = str(caught.value)
    assert "whole number in [0, 3] (D_out = 4 classes)" in message and where in message


def test_a_single_column_has_no_inputs_and_is_refused():
    with pytest.raises(ConfigError, match="the last column holds the class and the others"):
        parse_csv(b"label\n0\n1\n", d_out=2, task="classification")


def test_the_uploaded_classes_are_the_step_loss_targets():
    data = parse_csv(_csv(LABELS), d_out=4, task="classification")
    report = run_report(StepConfig(task="classification", d_out=4, lr=0.05), data)
    # Softmax cross-entropy of the float32 model's logits, in float64 here.
    x = INPUTS.astype(np.float32).astype(np.float64)
    logits = x @ report.kernel.before.astype(np.float64) + report.bias.before.astype(np.float64)
    shifted = logits - logits.max(1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(1, keepdims=True))
    expected = -np.mean(log_softmax[np.arange(len(LABELS)), LABELS])
    assert report.float32_initial_loss == pytest.approx(expected, rel=1e-5)
