"""Every endpoint through gradio_client, as a Python user calls it: by keyword for every
registered recipe x model x optimizer x precision policy x task x norm (``client_calls``'s
covering design, read from the registries), and positionally in the documented orders
(docs/calling.md).

Each call gets what the core says of it (``client_calls.refusal``): a refusal, with the core's
message as the client surfaces it, or an answer whose settings echo the call's and whose
numbers are finite. The shape is the suite's 32 x 8 -> 4 (an MLP of one hidden layer of 8),
the training run 3 steps.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import pytest
from client_calls import (
    MLP_SIZE,
    RUN,
    SMALL,
    covering_rows,
    file_like,
    non_defaults,
    refusal,
    takes,
)
from gradio_client.exceptions import AppError
from gradio_client.utils import is_file_obj_with_meta

from http_calls import FIELDS, STATE_FIELDS, TRANSFORMER_FIELDS, call
from playground.core.formats.dtypes import FORMATS
from playground.core.recipes.registry import RECIPES, recipe
from playground.core.settings.settings import defaults, settings
from playground.views.export import (
    EXPORTED_FIELDS,
    FRAMEWORKS,
    TORCH_POLICIES,
    exported_fields,
    script_dtypes,
)

ROWS = covering_rows()
# The API's name of a setting where it differs from the field's.
API_NAMES = {"model_seed": "seed"}
# Every endpoint the app offers (CONTRACTS.md), and the trivial one bench/bench_app.py times.
ENDPOINTS = {
    "/step",
    "/downloads",
    "/sweep",
    "/dynamics",
    "/export",
    "/inspect",
    "/ping",
    "/tensors",
    "/compare",
}
# /downloads takes /step's inputs; /export /step's, the run's and the framework, then the
# settings added since (docs/calling.md).
ORDERS = {
    **FIELDS,
    "downloads": FIELDS["step"],
    "export": (
        *FIELDS["step"][: FIELDS["step"].index("nvfp4_hadamard") + 1],
        *("steps", "mode", "period", "pure_rounding", "framework"),
        *STATE_FIELDS,  # the settings added after the export's own inputs
        *TRANSFORMER_FIELDS,
    ),
}


def _call(client, endpoint: str, settings: dict[str, Any], **extra: Any) -> tuple[Any, Any]:
    """(outputs, None), or (None, the refusal's message) when the app refuses the call."""
    named = {API_NAMES.get(name, name): value for name, value in settings.items()}
    try:
        return client.predict(**named, **extra, api_name=f"/{endpoint}"), None
    except AppError as error:
        return None, str(error)


def _echoes(config: dict[str, Any], settings: dict[str, Any]) -> None:
    assert {name: config[name] for name in settings} == settings


def _finite(*values: Any) -> bool:
    return all(isinstance(value, float) and math.isfinite(value) for value in values)


def _constant(name: str, value: Any) -> str:
    """How the exported script writes a setting: ``N = 32``, ``MODEL = "mlp"``."""
    return f"{name.upper()} = {json.dumps(value)}"


def _row_id(row: dict[str, Any]) -> str:
    return f"{row['compute_dtype']}-{row['model']}"


def test_the_app_offers_exactly_the_endpoints_called_here(client):
    assert set(client.view_api(print_info=False, return_format="dict")["named_endpoints"]) == (
        ENDPOINTS
    )


def test_tensors_by_keyword(client, tmp_path):
    """/tensors takes its one input, ``file``, by keyword too (its positional call, its refusals
    and its counts against ml_dtypes: tests/app/test_tensors_app.py)."""
    import numpy as np
    from gradio_client import handle_file
    from safetensors.numpy import save_file

    path = tmp_path / "tiny.safetensors"
    save_file({"w": np.array([1.0, 2.0**-30, 70000.0], np.float32)}, str(path))
    summary, reading = client.predict(file=handle_file(str(path)), api_name="/tensors")
    (row,) = summary["tensors"]
    assert (row["name"], row["shape"], row["dtype"]) == ("w", [3], "F32")
    # float16: 2^-30 is below half its smallest subnormal (2^-25), 70000 past its 65504
    assert row["formats"]["float16"]["zero"] == pytest.approx(1 / 3)
    assert "`tiny.safetensors` holds 1 tensor; 1 is floating point" in reading


def _step_and_downloads(client, row: dict[str, Any]) -> None:
    """The step answers (or refuses as the core does); a block recipe's comparison names its
    kernel; the downloaded JSON is the summary the step answered with."""
    outputs, refused = _call(client, "step", row)
    assert refused == refusal("step", row)
    if refused:
        return
    _, summary, *_ = outputs
    _echoes(summary["config"], row)
    assert _finite(summary["losses"]["mixed_new"], summary["losses"]["float32_new"])
    comparison = summary["recipe_comparison"]
    if RECIPES[row["compute_dtype"]].block is None:
        assert comparison["recipe"] is None and "kernel" not in comparison
    else:
        assert comparison["recipe"] == row["compute_dtype"]
        assert comparison["kernel"].startswith(("emulated", "native"))
        assert _finite(comparison["output_rel_error"])
    files, refused = _call(client, "downloads", row)
    assert refused == refusal("downloads", row) is None
    assert [Path(file).suffix for file in files] == [".csv", ".json"]
    assert json.loads(Path(files[1]).read_text()) == summary


def _sweep_and_dynamics(client, row: dict[str, Any]) -> None:
    """The sweep and a 3-step training run answer (or refuse as the core does)."""
    outputs, refused = _call(client, "sweep", row)
    assert refused == refusal("sweep", row)
    if not refused:
        _, summary, _, files = outputs
        _echoes(summary["config"], row)
        assert len(summary["log2_scales"]) == len(summary["new_loss"]) > 1 and files is None
        assert _finite(summary["float32_new_loss"])
        assert set(summary["safe_log2_scales"]) <= set(summary["log2_scales"])
    run = row | RUN
    outputs, refused = _call(client, "dynamics", run)
    assert refused == refusal("dynamics", run)
    if not refused:
        _, summary, *_, files = outputs
        _echoes(summary["config"], run)
        assert _finite(summary["final_loss"]["float32"]) and files is None


def _export(client, row: dict[str, Any], framework: str) -> None:
    """The script writes the row's settings, or the export refuses by name what the script
    does not reproduce: a recipe it does not compute in, a setting it does not write at other
    than its default, a policy torch.autocast does not compute (docs/using.md, "Take it
    home")."""
    outputs, refused = _call(client, "export", row, framework=framework)
    unexported = non_defaults(row) - set(exported_fields(framework))
    unexported |= (
        {"compute_dtype"} if row["compute_dtype"] not in script_dtypes(framework) else set()
    )
    if framework == "pytorch" and row.get("precision_policy", "exercise") not in TORCH_POLICIES:
        unexported.add("precision_policy")
    if unexported:
        assert refused and refused.startswith(tuple(unexported)), refused
        return
    assert refused is None
    script, script_file = outputs
    # The script's box drops the file's last newline.
    assert Path(script_file).read_text() == script + "\n"
    for name in ("compute_dtype", "model", "optimizer", *SMALL):
        assert _constant(name, row[name]) in script
    assert ("torch.autocast(" in script) == (framework == "pytorch")


def _raw_data(endpoint: str, values: dict[str, Any]) -> list[Any]:
    return [values[name] for name in ORDERS[endpoint]]


def _no_file_like_answer(app_url: str, row: dict[str, Any]) -> None:
    """Every endpoint's raw answer for the row, as it reaches gradio_client (over HTTP, its
    programs compiled by the calls before): each dict the client's own predicates take for a
    file is one of the app's files (gradio.FileData), which the client can fetch."""
    values = defaults() | row | RUN | {"data": None, "downloads": True, "number": "1/3"}
    calls = [(endpoint, values) for endpoint in ("step", "downloads", "sweep", "dynamics")]
    calls += [("export", values | {"framework": framework}) for framework in FRAMEWORKS]
    calls += [("inspect", values), ("ping", {})]
    fetched = 0
    with httpx.Client(timeout=60) as http:
        for endpoint, sent in calls:
            answer = call(app_url, endpoint, _raw_data(endpoint, sent) if sent else [], http=http)
            assert answer.kind in ("complete", "error"), (endpoint, answer)
            for entry in file_like(answer.payload if answer.kind == "complete" else []):
                assert is_file_obj_with_meta(entry), (endpoint, entry)
                assert http.get(entry["url"]).status_code == 200, (endpoint, entry)
                fetched += 1
    # The downloads' two files at least, unless the step is refused: the walk finds files.
    assert fetched >= 2 * (refusal("step", row) is None)


# The quick tier calls every endpoint with one row (the page's defaults); the full tier with
# every row of the design.
QUICK_ROW = "bfloat16-linear"


@pytest.mark.parametrize(
    "row",
    [
        pytest.param(
            row, id=_row_id(row), marks=() if _row_id(row) == QUICK_ROW else pytest.mark.slow
        )
        for row in ROWS
    ],
)
def test_every_endpoint_by_keyword(client, app_url, row):
    """The row's settings by keyword at every endpoint, each answer checked (or its refusal,
    which must be the core's); then the same calls' raw answers hold no dict the client takes
    for a file but the app's own files. A summary's string under ``path``
    (``recipe_comparison.path``, before it was named ``kernel``) was one: the client tried to
    download it and failed with 403. One test per row, so its programs stay compiled for all
    its calls (the server evicts the least recently used past PLAYGROUND_MAX_PROGRAMS)."""
    _step_and_downloads(client, row)
    _sweep_and_dynamics(client, row)
    for framework in FRAMEWORKS:
        _export(client, row, framework)
    _no_file_like_answer(app_url, row)


def _positional_row() -> dict[str, Any]:
    """The design's row the positional calls reuse: the last (its programs the likeliest to be
    still compiled) that the core accepts at every endpoint and whose recipe ignores
    fp8_scaling and nvfp4_hadamard, so they can differ from their defaults for free."""
    return [
        row
        for row in ROWS
        if not recipe(row["compute_dtype"]).scalings
        and not recipe(row["compute_dtype"]).hadamard_setting
        and all(refusal(endpoint, row | RUN) is None for endpoint in ("sweep", "dynamics"))
    ][-1]


def _positional(endpoint: str) -> dict[str, Any]:
    """A value for every input of ``endpoint``, in its documented order: the positional row's
    settings, and every other input away from its default (the last of a setting's choices)
    where that compiles no new program and the row's model takes it (the training run keeps
    the row's mode and rounding); the export's, what its script reproduces, in the last plain
    recipe and the last model."""
    table = settings()
    values = defaults() | {
        name: bounds.choices[-1] for name, bounds in table.items() if bounds.choices
    }
    values |= {
        "model_seed": 3,
        "lr": 0.05,
        "loss_scale": 256.0,
        "data_seed": 2,
        "input_scale": 0.5,
        "target_scale": 2.0,
        "period": 2,
        "amax_history": 4,
        "outlier_share": 0.001,
        "outlier_scale": 256.0,
        "mode": defaults()["mode"],
        "pure_rounding": defaults()["pure_rounding"],
        # Each new accumulation or optimizer-state dtype compiles new programs; an interval
        # under float32 accumulation compiles none.
        "accumulation": defaults()["accumulation"],
        "moments_dtype": defaults()["moments_dtype"],
        "promotion_interval": 128,
    }
    row = _positional_row()
    # The row carries its model's own size (an MLP's); a size its model does not take moves
    # for free, one it takes keeps the row's (a transformer's d_model: hidden_width 8 instead
    # of its 64 compiled the step's, the sweep's and the run's programs again, about 50 s).
    values |= {name: size for name, size in MLP_SIZE.items() if not takes(row["model"], name)}
    values |= {} if takes(row["model"], "norm") else {"norm": defaults()["norm"]}
    values |= row | RUN | {"data": None, "downloads": True}
    if endpoint == "export":
        values |= {name: defaults()[name] for name in table if name not in EXPORTED_FIELDS}
        plain = [name for name in RECIPES if recipe(name).plain_dtype == name]
        values |= {"compute_dtype": plain[-1], "model": table["model"].choices[-1]}
        values |= {name: table[name].choices[-1] for name in ("mode", "pure_rounding")}
        values |= {"framework": FRAMEWORKS[-1]}
    return {name: values[name] for name in ORDERS[endpoint]}


# The full tier's: its row (away from the defaults) compiles programs of its own.
@pytest.mark.slow
@pytest.mark.parametrize("endpoint", sorted(set(ORDERS) - {"inspect"}))
def test_every_endpoint_positionally_in_the_documented_order(client, endpoint):
    """Every input sent positionally in the documented order: the answer's settings (or the
    script's constants) show each where it was meant, the files asked for come."""
    values = _positional(endpoint)
    outputs = client.predict(*values.values(), api_name=f"/{endpoint}")
    sent = {name: value for name, value in values.items() if name in settings()}
    if endpoint == "export":
        script, _ = outputs
        for name in sent.keys() & set(EXPORTED_FIELDS):
            if takes(sent["model"], name):  # a script writes only its model's own options
                assert _constant(name, sent[name]) in script, name
        assert "torch.autocast(" in script
    elif endpoint == "downloads":
        assert json.loads(Path(outputs[1]).read_text())["config"] == defaults() | sent
    else:
        summary, files = outputs[1], outputs[-1]
        assert summary["config"] == defaults() | sent
        if endpoint != "step":
            assert [Path(file).suffix for file in files] == [".csv", ".json"]


def test_inspect_positionally_and_by_keyword(client):
    table = client.predict("65519.99998", api_name="/inspect")
    assert table == client.predict(number="65519.99998", api_name="/inspect")
    header = next(line for line in table.splitlines() if line.startswith("|"))
    assert [cell.strip() for cell in header.strip("|").split("|")][1:] == list(FORMATS)
