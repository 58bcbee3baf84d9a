"""Hostile inputs to the launched app get one refusal naming the field, and no traceback.

Against the shared app (one visitor, 127.0.0.1), each test checking that the server's log
gains no traceback (``quiet_log``):

  - ``data`` given as "", [] or {} is refused naming ``data``; a file payload in an input that
    takes none, sent again and again, is refused naming that input each time;
  - ``downloads`` takes true or false only; 1, "true", "abc" or null is refused naming it;
  - more inputs than an endpoint takes are refused, saying how many it takes;
  - gradio_client shows the app's own message when the app refuses a join (a second heavy run);
  - a backtick in an uploaded file's name stays inside the headline's code span (rendered by a
    CommonMark parser, markdown-it);
  - a client that disconnects midway through an upload leaves the server serving, quietly.
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import httpx
import pytest
from markdown_it import MarkdownIt

from http_calls import FIELDS, call
from playground.core.settings.settings import StepConfig, defaults
from playground.ui.fair_use import HEAVY_REFUSAL

FILE_META = {"_type": "gradio.FileData"}
SMALL = {"n": 8, "d_in": 4, "d_out": 2, "model_seed": 0}


def _inputs(api: str, **changes) -> list:
    """Every input of ``api`` positionally (FIELDS, as a caller writes them): the defaults on
    a tiny batch, no file, no downloads."""
    values = defaults() | SMALL | {"data": None, "downloads": False} | changes
    return [values[name] for name in FIELDS[api]]


def _refused(api: str, app_url: str, data: list) -> str:
    """The refusal's message: an error event's, or the detail of the join's HTTP 4xx (a heavy
    run's inputs are checked as it joins)."""
    answer = call(app_url, api, data)
    assert answer.kind in ("error", "http"), f"{answer.kind}: {answer.payload!r:.300}"
    assert answer.status < 500, answer.message
    return json.loads(answer.payload)["detail"] if answer.kind == "http" else answer.message


@pytest.mark.parametrize("value", ["", [], {}], ids=["empty-string", "empty-list", "empty-dict"])
def test_data_that_is_no_file_payload_is_refused_naming_data(app_url, quiet_log, value):
    message = _refused("step", app_url, _inputs("step", data=value))
    assert message == (
        f"data must be an uploaded file (a FileData dict) or null for none; got {value!r}"
    )


def test_a_file_payload_in_an_input_that_takes_none_is_refused_each_time(app_url, quiet_log):
    payload = {"path": "/etc/passwd", "meta": FILE_META}
    for _ in range(3):
        message = _refused("step", app_url, _inputs("step", lr=payload))
        assert message.startswith("lr (learning rate) must be a finite number in [0, "), message
        assert message.count("lr (learning rate)") == 1
    # ``downloads`` is no setting: the refusal names the input.
    message = _refused("sweep", app_url, _inputs("sweep", downloads=payload))
    assert message.startswith("downloads takes no file; got {'path': '/etc/passwd'"), message


@pytest.mark.parametrize("value", [1, 0, "true", "abc", None], ids=str)
def test_downloads_takes_true_or_false_only(app_url, quiet_log, value):
    message = _refused("sweep", app_url, _inputs("sweep", downloads=value))
    assert message == f"downloads must be true or false; got {value!r}"


@pytest.mark.parametrize("api", ["step", "sweep"])
def test_more_inputs_than_an_endpoint_takes_are_refused_saying_how_many(app_url, quiet_log, api):
    taken = len(FIELDS[api])
    message = _refused(api, app_url, [*_inputs(api), 1, "x"])
    assert f"{api} takes {taken} inputs (seed, n, d_in, " in message, message
    assert f"got {taken + 2}, 2 more than it takes" in message, message


@pytest.mark.slow
def test_gradio_client_shows_the_apps_message_for_a_refused_join(app_url, quiet_log):
    """A second heavy run of one visitor is refused as it joins (HTTP 429 to a raw call):
    gradio_client raises AppError with the app's message, not a bare 429."""
    from gradio_client import Client
    from gradio_client.exceptions import AppError
    from gradio_client.utils import Status

    client = Client(app_url, verbose=False)
    # test_public_space's run (about 1 s warm), so the suite compiles it once.
    steps = StepConfig(n=1024, d_in=256, d_out=128).max_steps
    run = [0, 1024, 256, 128, 0.1, 1024.0, 0, 1.0, 1.0, "bfloat16", steps, "static", 100]
    first = client.submit(*run, api_name="/dynamics")
    deadline = time.monotonic() + 60
    while first.status().code in (Status.STARTING, Status.JOINING_QUEUE):
        assert time.monotonic() < deadline, "the first run never joined the queue"
        time.sleep(0.02)
    assert not first.done(), "the first run ended before the second could join"
    with pytest.raises(AppError) as caught:
        client.predict(*run, api_name="/dynamics")
    assert str(caught.value) == HEAVY_REFUSAL
    assert first.result()[1]["steps"] == steps  # the first run was untouched
    _, summary, *_ = client.predict(*run[:6], api_name="/step")  # the session keeps working
    assert summary["config"]["n"] == 1024


def _code_spans(markdown: str) -> list[str]:
    tokens = MarkdownIt("commonmark").parseInline(markdown)
    return [
        child.content
        for token in tokens
        for child in token.children or []
        if child.type == "code_inline"
    ]


@pytest.mark.parametrize("name", ["a`b.csv", "``x``.csv", "`lead.csv", "end.csv`"])
def test_a_backtick_in_a_file_name_stays_in_the_headlines_code_span(app_url, quiet_log, name):
    answer = httpx.post(
        f"{app_url}gradio_api/upload",
        files={"files": (f"{uuid.uuid4().hex[:8]}.csv", b"a,y\n1,2\n3,4\n")},
    )
    path = answer.json()[0]
    data = {"path": path, "orig_name": name, "meta": FILE_META}
    done = call(app_url, "step", _inputs("step", d_in=1, d_out=1, data=data))
    assert done.kind == "complete", done.message
    line = next(line for line in done.payload[0].splitlines() if "Data: your file" in line)
    spans = _code_spans(line)
    assert spans == [name], (line, spans)
    assert line.endswith("(input_scale, target_scale and data_seed do not apply).")


def test_a_client_that_leaves_midway_through_an_upload_leaves_no_traceback(
    app_url, app_server, quiet_log
):
    port = int(app_url.rstrip("/").rsplit(":", 1)[1])
    boundary = "cut-off-upload"
    part = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; filename="cut.csv"\r\n'
        "Content-Type: text/csv\r\n\r\n"
    ).encode() + b"1,2\n" * 10_000
    head = (
        "POST /gradio_api/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {2 * len(part)}\r\n\r\n"  # half of it is sent
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(head + part)
        time.sleep(0.5)  # the server is reading the body
    time.sleep(1.0)  # the server has seen the disconnect
    assert app_server.process.poll() is None
    answer = call(app_url, "step", _inputs("step"))
    assert answer.kind == "complete", answer.message
