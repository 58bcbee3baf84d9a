"""The launched ``python app.py`` process, driven through gradio_client like an API user would."""

from __future__ import annotations

import json
import urllib.request

import pytest

from playground import StepConfig, run_report
from playground.core.settings.settings import defaults
from playground.ui.endpoints import FIGURE_LABELS

SMALL = {"model_seed": 0, "n": 32, "d_in": 8, "d_out": 4, "lr": 0.1, "loss_scale": 1024.0}
BAD_CALLS = [
    # (positional args of /step, extra keyword args, message the core raises)
    ((0, 0, 8, 4, 0.1, 1024.0), {}, "n (batch rows N) must be an integer in [1, 4096]; got 0"),
    (
        (0, 32, 2000, 4, 0.1, 1024.0),
        {},
        "d_in (input width D_in) must be an integer in [1, 1024]; got 2000",
    ),
    ((0, 32, 8, 4, -1, 1024.0), {}, "lr (learning rate) must be a finite number in [0, "),
    ((0, 32, 8, 4, 0.1, 0), {}, "loss_scale (loss scale) must be a finite number in ["),
    ((-1, 32, 8, 4, 0.1, 1024.0), {}, "model_seed (model seed) must be an integer in [0, 42"),
    ((1.5, 32, 8, 4, 0.1, 1024.0), {}, "model_seed (model seed) must be an integer in [0, 42"),
    (
        (0, 32, 8, 4, 0.1, 1024.0),
        {"compute_dtype": "int8"},
        (
            "compute_dtype (compute dtype) must be one of bfloat16, float16, float8, mxfp8, "
            "fp8_block, nvfp4; got 'int8'"
        ),
    ),
]


def _step(client, *args, **kwargs):
    return client.predict(*args, api_name="/step", **kwargs)


def test_valid_call_matches_an_in_process_report(client):
    headline, summary, counters, *plots = _step(client, 0, 32, 8, 4, 0.1, 1024.0)
    report = run_report(StepConfig(**SMALL))
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss
    assert summary["losses"]["float32_new"] == report.float32_new_loss
    assert f"<span id='mixed-new-loss'>{report.mixed_new_loss:.7g}</span>" in headline
    assert counters.startswith("Gradient entries in bfloat16 (36 in all)")
    assert len(plots) == len(FIGURE_LABELS)
    figures = [json.loads(plot["plot"]) for plot in plots]
    # Every chart draws data, but the activation chart, which says the linear model has none.
    assert all(f["data"] or "choose mlp" in f["layout"]["title"]["text"] for f in figures)


def test_six_arguments_use_the_defaults_for_the_rest(client):
    args = (3, 64, 16, 8, 0.25, 256.0)
    _, summary, *_ = _step(client, *args)
    expected = defaults() | dict(zip(SMALL, args, strict=True))
    assert summary["config"] == expected
    report = run_report(StepConfig(**expected))
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss


def test_optional_arguments_reach_the_step(client):
    _, summary, *_ = _step(client, 0, 32, 8, 4, 0.1, 1024.0, compute_dtype="float16", data_seed=7)
    assert summary["config"]["compute_dtype"] == "float16"
    assert summary["config"]["data_seed"] == 7
    report = run_report(StepConfig(**SMALL, compute_dtype="float16", data_seed=7))
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss


def test_float8_step_through_the_api_reports_its_recipe(client):
    _, summary, counters, *_ = _step(
        client, 0, 32, 8, 4, 0.1, 1024.0, compute_dtype="float8", fp8_scaling="none"
    )
    report = run_report(StepConfig(**SMALL, compute_dtype="float8", fp8_scaling="none"))
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss
    assert [(t["layer"], t["role"], t["format"]) for t in summary["float8"]] == [
        ("kernel", "input", "float8_e4m3fn"),
        ("kernel", "kernel", "float8_e4m3fn"),
        ("kernel", "gradient", "float8_e5m2"),
    ]
    assert all(t["scale"] == 1 for t in summary["float8"])  # fp8_scaling none
    assert counters.startswith("Gradient entries in float8_e5m2 (36 in all)")


@pytest.mark.parametrize(("args", "kwargs", "message"), BAD_CALLS, ids=lambda v: repr(v)[:40])
def test_bad_input_is_refused_with_the_core_message(client, args, kwargs, message):
    with pytest.raises(Exception) as caught:  # gradio_client raises AppError
        _step(client, *args, **kwargs)
    assert message in str(caught.value)


def test_server_keeps_serving_after_bad_calls(client):
    for args, kwargs, _ in BAD_CALLS:
        with pytest.raises(Exception):  # noqa: B017 - the message is checked above
            _step(client, *args, **kwargs)
    _, summary, *_ = _step(client, 0, 32, 8, 4, 0.1, 1024.0)
    assert summary["losses"]["mixed_new"] == run_report(StepConfig(**SMALL)).mixed_new_loss


def test_ping(client):
    assert client.predict(api_name="/ping") == "pong"


def test_serves_locally_on_the_given_port_without_a_share_link(app_server, client):
    with urllib.request.urlopen(app_server.url, timeout=10) as response:
        assert response.status == 200
        assert "Mixed-Precision Step Playground" in response.read().decode()
    api = client.view_api(return_format="dict", print_info=False)
    endpoints = set(api["named_endpoints"])
    assert {"/step", "/ping"} <= endpoints
    assert not [name for name in endpoints if "preset" in name], endpoints  # private helpers
    # Ten settings, the model's five, the optional uploaded data file, then float8's two,
    # precision per operation's three, block scaling's three and the optimizer state's and
    # accumulation's three, the transformer's two (appended after the file, so older positional
    # calls that pass it keep working).
    parameters = api["named_endpoints"]["/step"]["parameters"]
    assert [p["parameter_name"] for p in parameters][-19:] == [
        "model",
        "hidden_layers",
        "hidden_width",
        "activation",
        "optimizer",
        "data",
        "fp8_scaling",
        "amax_history",
        "precision_policy",
        "task",
        "norm",
        "outlier_share",
        "outlier_scale",
        "nvfp4_hadamard",
        "moments_dtype",
        "accumulation",
        "promotion_interval",
        "seq_len",
        "heads",
    ]
    assert len(parameters) == 29
    _step(client, 0, 32, 8, 4, 0.1, 1024.0)
    log = app_server.log_text()
    assert f"http://127.0.0.1:{app_server.port}" in log
    assert "gradio.live" not in log
    # Gradio drops surplus return values with only a warning: a figure would silently vanish.
    assert "output values" not in log, "run_step's outputs do not match the page's components"
