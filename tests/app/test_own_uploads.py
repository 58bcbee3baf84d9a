"""A file input takes only the visitor's own upload, read once; no input reaches another file.

Against the shared launched app (it trusts no proxy: every call here is one visitor,
127.0.0.1), as raw HTTP and through gradio_client:

  - an upload is accepted for the visitor who made it, read by its first event and deleted,
    and read and deleted again when the identical file is uploaded again;
  - the app's lock, a download, another visitor's upload, a file of Gradio's cache, /etc/passwd
    and the app's own source are refused through the ``data`` input and through a setting,
    naming the field, and each file is still there afterwards;
  - no refusal leaves a traceback in the server's log.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from app_server import REPO_ROOT
from http_calls import call
from playground.core.settings.settings import defaults
from playground.ui.arguments import STEP

FILE_META = {"_type": "gradio.FileData"}
CSV = b"a,b,y\n1,2,3\n4,5,6\n7,8,9\n"


def _step(**changes) -> list:
    """Every /step input positionally: the defaults on a tiny batch, no file."""
    values = defaults() | {"n": 8, "d_in": 4, "d_out": 2, "model_seed": 0} | changes
    return [values.get(name) for name in STEP.order]


def _payload(path: str | Path, name: str | None = None) -> dict:
    return {"path": str(path), "orig_name": name or Path(path).name, "meta": FILE_META}


def _upload(app_url: str, name: str, content: bytes, headers: dict | None = None) -> Path:
    answer = httpx.post(
        f"{app_url}gradio_api/upload", files={"files": (name, content)}, headers=headers or {}
    )
    assert answer.status_code == 200, answer.text
    return Path(answer.json()[0])


def _refusal(app_url: str, data: list) -> str:
    answer = call(app_url, "step", data)
    assert answer.kind in ("error", "http"), f"{answer.kind}: {answer.payload!r:.300}"
    return answer.message


def test_an_upload_is_read_by_its_visitors_first_event_then_deleted_every_time(app_url, quiet_log):
    path = _upload(app_url, f"mine-{uuid.uuid4().hex[:6]}.csv", CSV)
    assert path.is_file()
    data = _step(d_in=2, d_out=1, data=_payload(path))
    first = call(app_url, "step", data)
    assert first.kind == "complete", first.message
    assert first.payload[1]["config"]["n"] == 3 and not path.exists()  # read, then deleted
    again = call(app_url, "step", data)  # the page's later events send the path again
    assert again.kind == "complete" and again.payload[1] == first.payload[1]
    assert _upload(app_url, path.name, CSV) == path and path.is_file()  # named by content
    third = call(app_url, "step", data)
    assert third.kind == "complete", third.message
    assert not path.exists()  # deleted once read, this time too


def _app_folder(app_url: str) -> Path:
    """The app's folder, as anyone sees it in a download's path."""
    answer = call(app_url, "downloads", _step())
    assert answer.kind == "complete", answer.message
    download = Path(answer.payload[0][0]["path"])
    assert download.parent.parent.name == "downloads"
    return download.parent.parent.parent


def _targets(app_url: str) -> dict[str, Path]:
    """Files no input may read or delete, each existing now."""
    folder = _app_folder(app_url)
    download = call(app_url, "downloads", _step(model_seed=7)).payload[0][0]["path"]
    # Another visitor's unread upload: written where Gradio writes uploads, never recorded.
    other = folder / uuid.uuid4().hex / "theirs.csv"
    other.parent.mkdir()
    other.write_bytes(CSV)
    cached = folder / uuid.uuid4().hex / "cached.json"  # a file of Gradio's own in its cache
    cached.parent.mkdir()
    cached.write_text("{}")
    targets = {
        "lock": folder / ".lock",
        "download": Path(download),
        "other visitor's upload": other,
        "gradio cache": cached,
        "passwd": Path("/etc/passwd"),
        "source": REPO_ROOT / "app.py",
    }
    assert all(path.is_file() for path in targets.values())
    return targets


def test_no_input_reads_or_deletes_any_other_file_over_raw_http(app_url, quiet_log):
    for label, path in _targets(app_url).items():
        before = path.read_bytes()
        message = _refusal(app_url, _step(data=_payload(path)))
        assert message.startswith("data must be a file you uploaded to this page"), (
            label,
            message,
        )
        message = _refusal(app_url, _step(n=_payload(path)))  # a setting given a file
        assert message.startswith("n (batch rows N) must be an integer in [1, 4096]; got {"), (
            label,
            message,
        )
        assert path.is_file() and path.read_bytes() == before, label
    sweep = call(app_url, "sweep", _step(data=_payload(_app_folder(app_url) / ".lock")))
    assert sweep.kind == "http" and sweep.status == 400  # refused as the run joins
    assert json.loads(sweep.payload)["detail"].startswith("data must be a file you uploaded")


def test_no_input_reads_or_deletes_any_other_file_through_gradio_client(app_url, client, quiet_log):
    """gradio_client uploads a local path itself (a copy, the visitor's own); a URL of the
    app's file route it passes on as the file's path, as a raw call would."""
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    for label, path in _targets(app_url).items():
        before = path.read_bytes()
        with pytest.raises(AppError) as caught:
            client.predict(
                0, 8, 4, 2, data=handle_file(f"{app_url}gradio_api/file={path}"), api_name="/step"
            )
        assert str(caught.value).startswith("data must be a file you uploaded"), label
        with pytest.raises(AppError) as caught:
            client.predict(0, _payload(path), 4, 2, api_name="/step")
        assert str(caught.value).startswith("n (batch rows N) must be an integer"), label
        assert path.is_file() and path.read_bytes() == before, label
    # A heavy run's file is checked as it joins (HTTP 400 to a raw call): the same words.
    lock = f"{app_url}gradio_api/file={_app_folder(app_url) / '.lock'}"
    with pytest.raises(AppError) as caught:
        client.predict(0, 8, 4, 2, data=handle_file(lock), api_name="/sweep")
    assert str(caught.value).startswith("data must be a file you uploaded"), caught.value
