"""The page's commit, its controls gathered in the browser into one box (ui.gathered_inputs),
joined raw as the page joins it, against the shared app.

  - a commit with every setting changed answers the numbers the public /step answers for the
    same settings (a box read in the wrong order would run other settings);
  - a box that is no list of one value per control is refused naming the box, and the server
    keeps serving;
  - inside the box, the checks that go by control still hold: a file payload in a setting is
    refused naming the setting, a file that is not the visitor's own upload naming ``data``.
"""

from __future__ import annotations

import functools
import uuid

import httpx
import pytest

from http_calls import FIELDS, call, fn_index, join
from playground.core.settings.settings import defaults
from playground.ui.arguments import STEP
from playground.ui.uploads import NOT_YOURS

# Every step setting a caller can change on the page away from its default, a small shape.
CHANGED = {
    "model_seed": 3,
    "n": 24,
    "d_in": 12,
    "d_out": 5,
    "lr": 0.37,
    "loss_scale": 2.0**12,
    "data_seed": 9,
    "input_scale": 2.5,
    "target_scale": 0.75,
    "compute_dtype": "float16",
    "model": "mlp",
    "hidden_layers": 2,
    "hidden_width": 6,
    "activation": "tanh",
    "optimizer": "momentum",
}
FILE_META = {"_type": "gradio.FileData"}


@functools.cache
def _commit(url: str) -> tuple[int, tuple, int]:
    """(the commit's fn_index, the config's values of the controls the box holds after the
    step's, the number of States the commit reads)."""
    config = httpx.get(f"{url}config", timeout=30).json()
    by_id = {dependency["id"]: dependency for dependency in config["dependencies"]}
    event = by_id[fn_index(url, "on_commit")]
    gather = by_id[event["trigger_after"]]
    assert gather["backend_fn"] is False and gather["js"]  # the browser's half
    props = {component["id"]: component.get("props", {}) for component in config["components"]}
    rest = tuple(props[index].get("value") for index in gather["inputs"][len(STEP.order) :])
    return event["id"], rest, len(event["inputs"]) - 1


def _join(url: str, box, session: str | None = None):
    index, _, states = _commit(url)
    return join(url, index, [box, *[None] * states], session_hash=session or uuid.uuid4().hex)


def _box(url: str, **changes) -> dict:
    values = defaults() | {"data": None} | changes
    return {"values": [*(values[name] for name in STEP.order), *_commit(url)[1]]}


def _summary(outputs: list) -> dict:
    (summary,) = [o for o in outputs if isinstance(o, dict) and "losses" in o]
    return summary


def test_a_gathered_commit_runs_the_settings_it_gathered(app_url, quiet_log):
    answer = _join(app_url, _box(app_url, **CHANGED))
    assert answer.kind == "complete", answer.message
    committed = _summary(answer.payload)
    values = defaults() | {"data": None} | CHANGED
    step = call(app_url, "step", [values[name] for name in FIELDS["step"]])
    assert step.kind == "complete", step.message
    public = step.payload[1]
    assert {name: committed["config"][name] for name in CHANGED} == CHANGED
    assert committed["config"] == public["config"]
    assert committed["losses"] == public["losses"]


@pytest.mark.parametrize(
    "box",
    [[1, 2, 3], {"values": [0.1]}, {"values": "0.1"}, None, {"other": []}],
    ids=["a-list", "too-short", "no-list", "null", "no-values"],
)
def test_a_malformed_box_is_refused_naming_it_and_the_server_keeps_serving(app_url, quiet_log, box):
    session = uuid.uuid4().hex
    answer = _join(app_url, box, session)
    assert answer.kind in ("error", "http") and answer.status < 500, answer
    assert answer.message.startswith("gathered-inputs takes the page's "), answer.message
    again = _join(app_url, _box(app_url), session)
    assert again.kind == "complete", again.message


def test_a_file_payload_in_a_gathered_setting_is_refused_naming_it(app_url, quiet_log):
    payload = {"path": "/etc/passwd", "meta": FILE_META}
    answer = _join(app_url, _box(app_url, lr=payload))
    assert answer.kind in ("error", "http") and answer.status < 500, answer
    assert answer.message.startswith("lr (learning rate) must be a finite number in [0, ")


def test_a_gathered_file_that_is_not_the_visitors_upload_is_refused_naming_data(app_url, quiet_log):
    payload = {"path": "/etc/passwd", "orig_name": "passwd", "meta": FILE_META}
    answer = _join(app_url, _box(app_url, data=payload))
    assert answer.kind in ("error", "http") and answer.status < 500, answer
    assert answer.message == NOT_YOURS.format(field="data")
