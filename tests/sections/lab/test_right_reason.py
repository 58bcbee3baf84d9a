"""The page names the right reason for an overflow, as a PyTorch user meets it (issue: "a reason
a PyTorch user must unlearn"), read from the words the step's reading and the lab's note print:

- S past the loss's dtype: at float16, S = 2^16 does not fit in float16 (numpy says so here), so
  the backward pass starts from inf; the words name S, not the gradients' size, and torch's
  way (the loss and GradScaler's scale in float32, ``precision_policy="autocast"``) trains at
  the same S;
- a forward overflow at S = 1 is never blamed on the loss scale;
- a bfloat16 overflow is never told to try float16 (whose range is narrower).
"""

from __future__ import annotations

import math

import numpy as np

from playground import StepConfig, run_report
from playground.sections.lab.notes import magnitude_note
from playground.sections.lab.tab import magnitude_table
from playground.sections.step.summary import summarize

FLOAT16 = StepConfig(compute_dtype="float16", loss_scale=2.0**16)
BLAMES_THE_SCALE = "this scale is too large for them"


def test_a_scale_float16_cannot_hold_is_named_as_the_cause_and_torchs_way_trains():
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(FLOAT16.loss_scale))  # 65536 > 65504: S itself is inf there
    report = run_report(FLOAT16)
    summary = summarize(report)
    assert summary["causes"] == ["scaled_gradient_overflow"], summary["causes"]
    sentence = next(s for s in summary["reading"] if "does not fit in float16" in s)
    assert "S cast to float16, which overflowed to inf" in sentence, sentence
    assert "not because the gradients are large" in sentence
    assert "GradScaler" in sentence and "precision_policy=autocast" in sentence
    note = magnitude_note(report)
    assert "S itself does not fit in float16" in note and BLAMES_THE_SCALE not in note, note
    # torch's way: the loss in float32, where 2^16 fits; the same S trains.
    autocast = summarize(run_report(FLOAT16.replace(precision_policy="autocast")))
    assert "scaled_gradient_overflow" not in autocast["causes"], autocast["causes"]
    assert math.isfinite(autocast["losses"]["mixed_new"])
    # One binade lower, S fits float16 and the exercise's step trains too.
    lower = summarize(run_report(FLOAT16.replace(loss_scale=2.0**15)))
    assert lower["causes"] == [] and math.isfinite(lower["losses"]["mixed_new"])


def test_a_forward_overflow_at_scale_one_is_not_blamed_on_the_scale():
    config = StepConfig(
        n=32,
        d_in=8,
        d_out=4,
        compute_dtype="float16",
        loss_scale=1.0,
        input_scale=2.0**16,
        target_scale=2.0**16,
    )
    with np.errstate(over="ignore"):  # its squared residuals pass float16's largest value
        assert np.isinf(np.float16(2.0**16) ** 2)
    report = run_report(config)
    summary = summarize(report)
    assert "forward_overflow" in summary["causes"], summary["causes"]
    note = magnitude_note(report)
    assert BLAMES_THE_SCALE not in note and "smaller one" not in note, note
    if report.magnitudes["after scaling"]["non-finite"]:
        assert "forward pass already overflowed" in note, note


def test_a_bfloat16_overflow_is_not_sent_to_float16():
    config = StepConfig(compute_dtype="bfloat16", input_scale=2.0**64, target_scale=2.0**64)
    report = run_report(config)
    assert not math.isfinite(report.mixed_new_loss)  # the squares pass bfloat16's range too
    table = magnitude_table(report)
    assert "Try float16" not in table, table
    # And float16's own overflow points to bfloat16, whose range is wider.
    assert "Try bfloat16: its range is much wider." in magnitude_table(run_report(FLOAT16))
