"""Disk bounded in total, against a launched app of this module's own (its own Gradio folder,
small caps), and what a restart leaves: leftovers removed, stale results marked; behind its
one trusted proxy, one visitor's upload is no file of another's.

The app runs with GRADIO_TEMP_DIR in a temporary directory, so its folder (``playground-0``
there) holds every file it keeps: Gradio's uploads and cache, and its downloads. Sizes are
measured on disk by this test, independently of the app's own accounting.
"""

from __future__ import annotations

import itertools
import os
import time
from pathlib import Path

import httpx
import pytest

from app_server import AppServer
from browser_waits import headline, wait_for_new_headline
from http_calls import call, visitor
from playground.ui.arguments import DYNAMICS, STEP
from playground.ui.widgets import DEFAULTS

pytestmark = pytest.mark.slow

DISK_MB = 8
UPLOAD_MB_PER_HOUR = 3
UPLOAD_TTL = 4  # seconds
MB = 2**20
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def disk_app(tmp_path_factory):
    """The app with its own Gradio folder and small caps; stopped at the module's end."""
    base = tmp_path_factory.mktemp("gradio")
    env = {
        "GRADIO_TEMP_DIR": str(base),
        "PLAYGROUND_DISK_MB": str(DISK_MB),
        "PLAYGROUND_UPLOAD_MB_PER_HOUR": str(UPLOAD_MB_PER_HOUR),
        "PLAYGROUND_UPLOAD_TTL": str(UPLOAD_TTL),
        "PLAYGROUND_TRUSTED_PROXIES": "1",
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in env.items():
            patch.setenv(name, value)
        server = AppServer(log_name="test_disk.log").start()
        server.base = base
        try:
            yield server
        finally:
            server.stop()


def _area(app) -> Path:
    return app.base / "playground-0"


def _files(folder: Path) -> dict[str, int]:
    """Every file under ``folder`` (relative path -> bytes), the lock file left out. The app
    removes files and folders while this walks (its sweep of old uploads and downloads): a
    folder or file gone between listing and reading is not on the disk, so it is left out
    (os.walk skips a folder it cannot list; Path.rglob raised FileNotFoundError)."""
    sizes = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = Path(root) / name
            if name == ".lock":
                continue
            try:
                sizes[str(path.relative_to(folder))] = path.stat().st_size
            except FileNotFoundError:
                continue
    return sizes


def _upload(app, name: str, size: int, address: str) -> httpx.Response:
    return httpx.post(
        f"{app.url}gradio_api/upload",
        files={"files": (name, b"1,2\n" * (size // 4), "text/csv")},
        headers=visitor(address),
        timeout=60,
    )


# The last input of each heavy endpoint when ``downloads`` was appended after it; inputs
# appended since follow ``downloads``, so a positional call written then keeps its meaning.
BEFORE_DOWNLOADS = {"sweep": "amax_history", "dynamics": "pure_rounding"}


def _inputs(arguments, downloads: bool | None = None, **changes) -> list:
    """Every input of an endpoint positionally (no data), then ``downloads`` if given."""
    values = [None if name == "data" else changes.get(name, DEFAULTS[name]) for name in arguments]
    return values if downloads is None else [*values, downloads]


def _older_call(api: str, arguments, downloads: bool, **changes) -> list:
    """A positional call as written when ``downloads`` was the endpoint's last input."""
    last = arguments.index(BEFORE_DOWNLOADS[api])
    return _inputs(arguments[: last + 1], downloads, **changes)


def _full_call(api: str, arguments, downloads: bool, **changes) -> list:
    """A positional call with every input of today, ``downloads`` in its place."""
    last = arguments.index(BEFORE_DOWNLOADS[api])
    later = _inputs(arguments[last + 1 :], **changes)
    return [*_older_call(api, arguments, downloads, **changes), *later]


def test_uploads_and_downloads_stay_under_the_total_cap_and_unread_uploads_go(disk_app):
    area = _area(disk_app)
    for index in range(100):  # 2 MB from five visitors, none past its hourly cap
        answer = _upload(disk_app, f"upload-{index}.csv", 20_000, f"192.0.2.{index % 5 + 1}")
        assert answer.status_code == 200, answer.text
    shape = {"n": 64, "d_in": 1024, "d_out": 8}  # a gradients CSV of about 0.8 MB
    for _ in range(20):  # 16 MB of downloads in all, twice the cap
        answer = call(disk_app.url, "downloads", _inputs(STEP.order, **shape), visitor("192.0.2.9"))
        assert answer.kind == "complete", answer.message
        paths = [Path(file["path"]) for file in answer.payload[0]]
        assert all(path.is_file() and path.is_relative_to(area / "downloads") for path in paths)
        assert sum(_files(area).values()) <= DISK_MB * MB
    # Written once: no copy of a download anywhere else in Gradio's folder.
    assert not [
        name for name in _files(disk_app.base) if "gradients_" in name and "downloads" not in name
    ]
    assert sum(_files(area).values()) <= DISK_MB * MB
    for _ in range(40):  # no event read the uploads: they go after UPLOAD_TTL
        if not [name for name in _files(area) if "upload-" in name]:
            break
        time.sleep(0.5)
    assert [name for name in _files(area) if not name.startswith("downloads")] == []


def test_a_refused_upload_leaves_no_file(disk_app):
    area = _area(disk_app)
    address = "198.51.100.7"
    before = set(_files(area))
    for index in range(2):
        assert _upload(disk_app, f"kept-{index}.csv", int(1.3 * MB), address).status_code == 200
    refused = _upload(disk_app, "past-the-cap.csv", 500_000, address)  # by the hourly cap
    assert refused.status_code == 429
    assert f"{UPLOAD_MB_PER_HOUR:.1f} MB per visitor per hour" in refused.json()["error"]
    # alone larger than a visitor's hourly cap: refused before a byte is read (Gradio's own
    # max_file_size refusal: tests/app/test_public_space.py)
    too_big = _upload(disk_app, "too-big.csv", int(3.5 * MB), "198.51.100.8")
    assert too_big.status_code == 413, too_big.text
    new = set(_files(area)) - before
    assert not [name for name in new if "too-big" in name or "past-the-cap" in name]
    assert not [name for name in new if "/" not in name]  # no loose partial upload either
    assert len([name for name in new if "kept-" in name]) == 2
    other = _upload(disk_app, "other.csv", 500_000, "198.51.100.9")  # a visitor's own cap
    assert other.status_code == 200, other.text


def _step_with(path: Path) -> list:
    """A /step call positionally, with the upload at ``path`` as its data (1 input, 1 target)."""
    payload = {"path": str(path), "orig_name": path.name, "meta": {"_type": "gradio.FileData"}}
    inputs = _inputs(STEP.order, d_in=1, d_out=1)
    return [
        payload if name == "data" else value for name, value in zip(STEP.order, inputs, strict=True)
    ]


def test_another_visitors_upload_is_refused_and_stays_for_its_own(disk_app):
    """Behind the one trusted proxy a visitor is its X-Forwarded-For address: one visitor's
    upload is no file of another's, through raw HTTP or gradio_client, and stays on disk until
    its own visitor's event reads it (each part well within UPLOAD_TTL)."""
    from gradio_client import Client, handle_file
    from gradio_client.exceptions import AppError

    other = Client(disk_app.url, headers=visitor("192.0.2.42"), verbose=False)
    path = Path(_upload(disk_app, "theirs.csv", 400, "192.0.2.41").json()[0])
    refused = call(disk_app.url, "step", _step_with(path), visitor("192.0.2.42"))
    assert refused.kind == "error", refused.payload
    assert refused.message.startswith("data must be a file you uploaded"), refused.message
    assert path.is_file()
    mine = call(disk_app.url, "step", _step_with(path), visitor("192.0.2.41"))
    assert mine.kind == "complete", mine.message
    assert mine.payload[1]["config"]["n"] == 100 and not path.exists()
    path = Path(_upload(disk_app, "theirs-too.csv", 400, "192.0.2.41").json()[0])
    with pytest.raises(AppError, match="^data must be a file you uploaded"):
        url = f"{disk_app.url}gradio_api/file={path}"
        other.predict(0, 8, 1, 1, data=handle_file(url), api_name="/step")
    assert path.is_file()


def test_api_sweeps_and_training_runs_write_no_files_unless_asked(disk_app):
    area = _area(disk_app)
    small = {"n": 16, "d_in": 4, "d_out": 2}
    run = {**small, "steps": 5}
    before = _files(area / "downloads") if (area / "downloads").exists() else {}
    for api, arguments, changes in (("sweep", STEP, small), ("dynamics", DYNAMICS, run)):
        for data in (
            _inputs(arguments.order[: arguments.order.index(BEFORE_DOWNLOADS[api]) + 1], **changes),
            _older_call(api, arguments.order, False, **changes),
            _full_call(api, arguments.order, False, **changes),
        ):
            answer = call(disk_app.url, api, data, visitor("192.0.2.20"))
            assert answer.kind == "complete", answer.message
            assert answer.payload[-1] is None
    assert (_files(area / "downloads") if (area / "downloads").exists() else {}) == before
    for (api, arguments, changes), (seed, make) in itertools.product(
        (("sweep", STEP, small), ("dynamics", DYNAMICS, run)), enumerate((_older_call, _full_call))
    ):  # a seed each, so each call's files have names of their own
        inputs = make(api, arguments.order, True, **changes, model_seed=seed)
        answer = call(disk_app.url, api, inputs)
        assert answer.kind == "complete", answer.message
        paths = [Path(file["path"]) for file in answer.payload[-1]]
        assert [path.suffix for path in paths] == [".csv", ".json"]
        for path in paths:  # once: in the downloads folder, and no copy elsewhere
            assert path.is_file() and path.is_relative_to(area / "downloads")
            assert [name for name in _files(disk_app.base) if name.endswith(path.name)] == [
                str(path.relative_to(disk_app.base))
            ]


def test_the_pages_download_buttons_still_give_their_files(disk_app, browser):
    page = browser.new_page()
    try:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(disk_app.url)
        page.wait_for_function("document.querySelector('#headline #mixed-new-loss')")
        page.get_by_text("All numbers (JSON, as returned by the API) and downloads").click()
        page.get_by_role("button", name="Prepare the gradients CSV and the JSON summary").click()
        page.get_by_role("tab", name="Precision lab").click()
        page.get_by_role("button", name="Sweep the loss scale").click()
        page.get_by_text("Sweep numbers (JSON, CSV)").click()
        for names in (("gradients_", "summary_"), ("sweep_",)):
            for name in names:
                link = page.locator(f"a[href*='{name}']").first
                link.wait_for(state="attached")
                answer = httpx.get(httpx.URL(page.url).join(link.get_attribute("href")), timeout=30)
                assert answer.status_code == 200 and answer.content, name
    finally:
        page.close()


def test_an_over_long_link_shows_its_message_and_the_defaults(disk_app, browser):
    page = browser.new_page()
    try:
        page.set_default_timeout(TIMEOUT_MS)
        query = f"lr=0.05&junk={'a' * 65_000}"  # the size that left the page empty and silent
        page.goto(f"{disk_app.url}?{query}")
        notice = page.locator("#url-notice")
        notice.wait_for(state="visible")
        text = notice.inner_text()
        assert f"{len(query):,} characters" in text and "8,192" in text, text
        page.wait_for_function("document.querySelector('#headline #mixed-new-loss')")
        assert page.locator("#lr input").input_value() == str(DEFAULTS["lr"])
        page.wait_for_function("!window.location.search.includes('link_too_long')")
    finally:
        page.close()


def test_a_commit_lost_to_a_restart_marks_the_results_stale(disk_app, browser):
    page = browser.new_page()
    try:
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(disk_app.url)
        page.wait_for_function("document.querySelector('#headline #mixed-new-loss')")
        box = page.locator("#n input[type=number]")
        first = headline(page)
        box.fill("300")
        box.press("Enter")
        shown = wait_for_new_headline(page, first)
        disk_app.stop()
        box.fill("4096")
        box.press("Enter")  # the server is down: the commit is lost
        banner = page.locator("#lost-banner")
        banner.wait_for(state="visible", timeout=20_000)
        assert "Not updated" in banner.inner_text()
        assert headline(page) == shown and box.input_value() == "4096"
        opacity = page.evaluate(
            "() => getComputedStyle(document.getElementById('headline').closest('#results > *'))"
            ".opacity"
        )
        assert float(opacity) < 1
        disk_app.start()
        # Back: Gradio reloads the page from its address (the last results' settings), or the
        # banner stays; never the box's value over other results without it.
        page.wait_for_function(
            "shown => !!document.getElementById('lost-banner') || ("
            "document.querySelector('#n input[type=number]')?.value === '300' &&"
            " document.querySelector('#headline #mixed-new-loss')?.textContent.trim() === shown)",
            arg=shown,
        )
    finally:
        page.close()


def test_leftovers_of_an_earlier_run_are_removed_at_start(disk_app):
    area = _area(disk_app)
    answer = call(disk_app.url, "downloads", _inputs(STEP.order), visitor("192.0.2.30"))
    assert answer.kind == "complete", answer.message
    assert _upload(disk_app, "left.csv", 4_000, "192.0.2.30").status_code == 200
    disk_app.stop()  # SIGTERM: the app's files stay behind
    assert any("gradients_" in name for name in _files(area))
    assert any("left.csv" in name for name in _files(area))
    older = disk_app.base / "playground-7"  # a folder of another run that ended
    older.mkdir()
    (older / "old.csv").write_text("1,2\n")
    disk_app.start()
    assert _files(area) == {} and not older.exists()
    assert os.listdir(disk_app.base / "playground-0") == [".lock"]


def test_files_asked_for_on_a_full_disk_are_refused_naming_the_cap(tmp_path, monkeypatch):
    import gradio as gr

    from playground.ui.tabs.lab import run_sweep_event
    from playground.views import file_store

    monkeypatch.setattr(file_store, "_root", str(tmp_path))
    monkeypatch.setattr(file_store, "MAX_BYTES", 10)
    with pytest.raises(gr.Error, match="keeps at most"):
        run_sweep_event(*_full_call("sweep", STEP.order, True, n=16, d_in=4, d_out=2))
    assert os.listdir(tmp_path) == []
