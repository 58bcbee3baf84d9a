"""The optimizer state's dtype and the matmuls' accumulation through the launched app: by keyword
with gradio_client, positionally over raw HTTP, refusals naming the field and its range."""

from __future__ import annotations

import pytest
from gradio_client.exceptions import AppError

from http_calls import FIELDS, call
from playground.core.settings.settings import defaults

SMALL = {"n": 32, "d_in": 8, "d_out": 4}


def test_step_reports_the_accumulation_by_keyword(client):
    _, plain, *_ = client.predict(**SMALL, api_name="/step")
    _, low, *_ = client.predict(**SMALL, accumulation="bfloat16", api_name="/step")
    assert plain["accumulation"]["accumulation"] == "float32"
    assert plain["accumulation"]["growth"] == []
    figures = low["accumulation"]
    assert low["config"]["accumulation"] == "bfloat16"
    assert figures["float32_output_rel_error"] == plain["accumulation"]["output_rel_error"]
    assert figures["output_rel_error"] > figures["float32_output_rel_error"]
    assert [row["d_in"] for row in figures["growth"]] == [128, 256, 512, 1024, 2048, 4096]
    assert any("significant bits (bfloat16)" in sentence for sentence in low["reading"])


def test_raw_http_takes_the_new_inputs_last_and_positionally(app_url):
    values = defaults() | SMALL | {"data": None, "accumulation": "14_bits"}
    values |= {"promotion_interval": 64, "moments_dtype": "bfloat16"}
    data = [values[name] for name in FIELDS["step"]]
    answer = call(app_url, "step", data)
    assert answer.kind == "complete", answer.message
    summary = answer.payload[1]
    assert summary["accumulation"]["accumulation"] == "14_bits"
    assert summary["accumulation"]["promotion_interval"] == 64
    assert summary["config"]["moments_dtype"] == "bfloat16"


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("promotion_interval", 100, "0 or a multiple of 32 in [0, 4096]"),
        ("promotion_interval", 8192, "an integer in [0, 4096]"),
        ("accumulation", "float16", "one of float32, bfloat16, 14_bits"),
        ("moments_dtype", "int8", "one of float32, bfloat16"),
    ],
)
def test_bad_values_are_refused_naming_the_field_and_range(client, field, value, allowed):
    with pytest.raises(AppError) as refused:
        client.predict(**SMALL, **{field: value}, api_name="/step")
    assert field in str(refused.value) and allowed in str(refused.value)


@pytest.mark.slow
def test_dynamics_takes_moments_dtype_by_keyword(client):
    run = {**SMALL, "steps": 3, "optimizer": "adam", "lr": 0.01}
    float32 = client.predict(**run, api_name="/dynamics")[1]
    bfloat16 = client.predict(**run, moments_dtype="bfloat16", api_name="/dynamics")[1]
    assert bfloat16["config"]["moments_dtype"] == "bfloat16"
    assert bfloat16["final_loss"]["float32"] == float32["final_loss"]["float32"]
    assert bfloat16["final_loss"]["mixed"] != float32["final_loss"]["mixed"]
