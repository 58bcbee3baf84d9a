"""The operations table and its summary: read from the report, strict JSON, and naming where
inf or NaN first appeared."""

from __future__ import annotations

import json

from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.step.operations import (
    operation_losses,
    operations_markdown,
    operations_summary,
)
from playground.sections.step.summary import summarize

SMALL = {"n": 32, "d_in": 8, "d_out": 4}


def test_the_summary_carries_the_table_and_both_losses_as_strict_json():
    config = StepConfig(
        **SMALL,
        model="mlp",
        hidden_layers=1,
        hidden_width=16,
        norm="layernorm",
        compute_dtype="float16",
        input_scale=1024.0,
    )
    report = run_report(config)
    summary = summarize(report)
    text = json.dumps(summary, allow_nan=False)  # strict JSON: no NaN or Infinity tokens
    assert json.loads(text)["operations"] == json.loads(json.dumps(operations_summary(report)))
    rows = summary["operations"]["rows"]
    names = ["layers.0", "norms.0", "relu 0", "layers.1", "mse"]
    assert [row["operation"] for row in rows] == names
    assert summary["operations"]["first_nonfinite"]["forward"] == "norms.0"
    assert not rows[1]["forward_finite"] and rows[0]["forward_finite"]
    losses = summary["losses"]
    assert losses["mixed_initial"] == losses["mixed_initial_in_compute_dtype"]  # exercise
    assert set(operation_losses(report)) <= set(losses)
    table = operations_markdown(report)
    assert "| norms.0 | normalisation | float16 | **inf/NaN** |" in table
    assert "forward, inf or NaN first appeared in norms.0" in table


def test_autocast_uses_and_shows_the_float32_loss():
    report = run_report(StepConfig(**SMALL, task="classification", precision_policy="autocast"))
    summary = summarize(report)
    assert summary["losses"]["mixed_initial"] == summary["losses"]["mixed_initial_in_float32"]
    assert [row["dtype"] for row in summary["operations"]["rows"]] == ["bfloat16", "float32"]
    assert summary["operations"]["rows"][-1]["operation"] == "softmax cross-entropy"
    assert "this step used the float32 one" in operations_markdown(report)
    assert "Every operation's result and gradient was finite." in operations_markdown(report)


def test_the_first_non_finite_sentence_reads_as_a_sentence_backward_alone():
    from playground import StepConfig, run_report
    from playground.sections.step.operations import first_nonfinite_sentence

    report = run_report(
        StepConfig(n=32, d_in=8, d_out=4, compute_dtype="float16", loss_scale=2.0**16)
    )
    first = report.first_nonfinite
    assert first["forward"] is None and first["backward"] is not None
    assert first_nonfinite_sentence(report) == (
        "On the way backward, inf or NaN first appeared in the gradient passed back from "
        f"{first['backward']}."
    )
