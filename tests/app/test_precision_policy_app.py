"""Precision per operation through the launched app: keyword inputs of /step reach the step and
its summary carries the operations table and both losses."""

from __future__ import annotations

import pytest
from gradio_client.exceptions import AppError

from playground import StepConfig, run_report

SMALL = (0, 32, 8, 4, 0.1, 1024.0)


def test_keyword_inputs_reach_the_step_and_its_summary(client):
    _, summary, *_ = client.predict(
        *SMALL,
        precision_policy="autocast",
        task="classification",
        api_name="/step",
    )
    config = StepConfig(n=32, d_in=8, d_out=4, precision_policy="autocast", task="classification")
    report = run_report(config)
    assert summary["config"]["precision_policy"] == "autocast"
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss
    assert summary["losses"]["mixed_initial_in_float32"] == report.mixed_initial_loss_in_float32
    rows = summary["operations"]["rows"]
    assert [(row["kind"], row["dtype"]) for row in rows] == [
        ("matmul", "bfloat16"),
        ("loss", "float32"),
    ]


def test_a_norm_for_the_linear_model_is_refused_by_name(client):
    with pytest.raises(AppError, match=r"norm \(normalisation\) must be none for the linear"):
        client.predict(*SMALL, norm="layernorm", api_name="/step")
