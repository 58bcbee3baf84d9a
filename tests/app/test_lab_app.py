"""The sweep, dynamics and inspector endpoints of the launched app, through gradio_client."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from helpers import step_inputs
from playground.core.settings.settings import defaults
from playground.ui.arguments import DYNAMICS, STEP
from playground.ui.downloads_input import position
from playground.ui.tabs.dynamics import run_dynamics_event
from playground.ui.tabs.lab import inspect_event, run_sweep_event

# The settings a positional call passes before the uploaded data file.
INPUT_ORDER = STEP.before_data
DYNAMICS_FIELDS = DYNAMICS.before_data

TINY_FLOAT16 = {
    "n": 32,
    "d_in": 8,
    "d_out": 4,
    "compute_dtype": "float16",
    "input_scale": 2.0**-12,
    "target_scale": 2.0**-12,
}
OVERFLOWING_FLOAT16 = {
    "n": 32,
    "d_in": 8,
    "d_out": 4,
    "compute_dtype": "float16",
    "loss_scale": 2.0**16,
}
DYNAMICS_ARGS = (30, "dynamic", 5)  # steps, mode, period


SMALL_SHAPE = {"n": 32, "d_in": 8, "d_out": 4}


def _run_values(overrides: dict, steps: int, mode: str, period: int) -> list:
    """The dynamics handler's positional inputs (the table's order) for these settings."""
    config = defaults() | overrides | {"steps": steps, "mode": mode, "period": period}
    return [config[name] for name in DYNAMICS_FIELDS]


def _figure(plot) -> dict:
    """A figure from either side: a gr.Plot value in process, its dict form through the client."""
    return json.loads(plot["plot"] if isinstance(plot, dict) else plot.plot)


@pytest.fixture(scope="module")
def api(client) -> dict:
    return client.view_api(return_format="dict", print_info=False)["named_endpoints"]


def test_lab_endpoints_are_named_with_their_inputs_and_outputs(api):
    assert {"/sweep", "/dynamics", "/inspect", "/ping"} <= set(api)
    # The settings before the file, the file, the settings added after it, then downloads.
    step_late = STEP.order[STEP.order.index("data") + 1 :]
    assert len(api["/sweep"]["parameters"]) == len(INPUT_ORDER) + 1 + len(step_late) + 1
    assert len(api["/sweep"]["returns"]) == 4  # reading, JSON, figure, downloads
    names = [p["parameter_name"] for p in api["/dynamics"]["parameters"]]
    # The same for the dynamics, whose settings include steps, mode and period.
    dynamics_late = DYNAMICS.order[DYNAMICS.order.index("data") + 1 :]
    assert len(names) == len(DYNAMICS_FIELDS) + 1 + len(dynamics_late) + 1
    assert names[10:13] == ["steps", "mode", "period"]  # where they were before the model five
    assert len(api["/dynamics"]["returns"]) == 6
    assert len(api["/inspect"]["parameters"]) == 1
    # Every input has the page's default, so a caller may stop after any of them.
    defaults_sent = [p["parameter_default"] for p in api["/sweep"]["parameters"]]
    # The settings' defaults, then no uploaded data, then the later ones', with no files right
    # after the inputs `downloads` was appended after (later settings follow it).
    late = [defaults()[name] for name in step_late]
    settings_sent = [*step_inputs(INPUT_ORDER), None, *late]
    at = position(STEP)
    assert defaults_sent == [*settings_sent[:at], False, *settings_sent[at:]]


def test_sweep_endpoint_matches_the_in_process_handler(client):
    reading, summary, plot, files = client.predict(
        *step_inputs(INPUT_ORDER, **TINY_FLOAT16), downloads=True, api_name="/sweep"
    )
    expected = run_sweep_event(*step_inputs(INPUT_ORDER, **TINY_FLOAT16))
    expected_reading, expected_summary, expected_plot = expected[:3]
    assert [Path(f).suffix for f in files] == [".csv", ".json"]
    assert summary == expected_summary
    assert reading == expected_reading
    assert 10 in summary["safe_log2_scales"] and 16 not in summary["safe_log2_scales"]
    assert _figure(plot) == _figure(expected_plot)


def test_dynamics_endpoint_matches_the_in_process_handler(client):
    values = _run_values(OVERFLOWING_FLOAT16, *DYNAMICS_ARGS)
    reading, summary, *plots, files = client.predict(*values, downloads=True, api_name="/dynamics")
    expected_reading, expected_summary, *expected_plots, _ = run_dynamics_event(*values)
    assert [Path(f).suffix for f in files] == [".csv", ".json"]
    assert summary == expected_summary
    assert summary["mixed_skipped_steps"] == [0, 6, 12, 18, 24]
    assert reading == expected_reading
    assert len(plots) == len(expected_plots) == 3
    assert [_figure(p) for p in plots] == [_figure(p) for p in expected_plots]


@pytest.mark.parametrize("value", [1e-9, 1 + 1e-4, 65520.0, "nan", "65519.99998", "0x3c00:float16"])
def test_inspect_endpoint_matches_the_in_process_handler(client, value):
    # The API's one input also reads the page's text (nan, exact decimals, a format's bits).
    # gr.Markdown strips the trailing newline; the table itself arrives unchanged.
    assert client.predict(value, api_name="/inspect") == inspect_event(value).strip()


def test_inspect_endpoint_rounds_65519_99998_once_into_float16(client):
    table = client.predict("65519.99998", api_name="/inspect")
    header, _, stored = [line for line in table.splitlines() if line.startswith("|")][:3]
    names = [cell.strip() for cell in header.strip("|").split("|")]
    values = dict(zip(names, (cell.strip() for cell in stored.strip("|").split("|")), strict=True))
    largest = float(np.finfo(np.float16).max)  # float16's own largest value, below its tie
    assert float(values["float16"]) == largest


def test_bad_dynamics_call_names_the_field_and_the_server_keeps_serving(client):
    with pytest.raises(Exception) as caught:  # gradio_client raises AppError
        client.predict(*_run_values(SMALL_SHAPE, 0, "static", 100), api_name="/dynamics")
    assert "steps (training steps) must be an integer in [1, 1000]; got 0" in str(caught.value)
    with pytest.raises(Exception) as caught:
        client.predict(*_run_values(SMALL_SHAPE, 10, "adaptive", 5), api_name="/dynamics")
    assert "mode (loss scaling) must be one of none, static, dynamic" in str(caught.value)
    assert client.predict(api_name="/ping") == "pong"
    # ... and still computes: a valid call after the refused ones gets its numbers.
    _, summary, *_ = client.predict(
        *_run_values(OVERFLOWING_FLOAT16, *DYNAMICS_ARGS), api_name="/dynamics"
    )
    assert summary["mixed_skipped_steps"] == [0, 6, 12, 18, 24]
