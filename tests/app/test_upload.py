"""Your own data: a CSV uploaded through the API (gradio_client.handle_file) and parsed with
row and column named on every error; the data drives the step, the sweep and the dynamics."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from playground import StepConfig, run_report
from playground.core.data.user_data import UserData, parse_csv
from playground.core.settings.settings import ConfigError

ROWS = np.random.default_rng(7).standard_normal((40, 6)).round(5)


def _csv(rows: np.ndarray, header: bool = True) -> str:
    head = ",".join(f"c{i}" for i in range(rows.shape[1])) + "\n" if header else ""
    return head + "\n".join(",".join(repr(float(v)) for v in row) for row in rows) + "\n"


def test_the_last_d_out_columns_are_the_targets_with_or_without_a_header():
    for header in (True, False):
        data = parse_csv(_csv(ROWS, header).encode(), 2)
        np.testing.assert_array_equal(data.x, ROWS[:, :4].astype(np.float32))
        np.testing.assert_array_equal(data.y, ROWS[:, 4:].astype(np.float32))


@pytest.mark.parametrize(
    ("content", "d_out", "field", "words"),
    [
        (b"", 1, "data", "empty"),
        (b"a,b,c\n", 1, "data", "header row and no data rows"),
        (b"1,2,3\n4,5\n", 1, "data", "row 2 has 2 cells where row 1 has 3"),
        (b"x,y\n1,2\n3,abc\n", 1, "data", "row 3, column 2 is 'abc', not a number"),
        (b"1,2\nnan,3\n", 1, "data", "row 2, column 1 is 'nan'"),
        (b"1,2\n1e39,3\n", 1, "data", "row 2, column 1 is '1e39'"),
        (b"y,target\n1,2\n", 1, "data", "every one of its 2 columns is headed as a target"),
        (("1,2\n" * 4097).encode(), 1, "data", "4,097 data rows; at most 4,096 (the cap on batch"),
        (b"1," * 600_000, 1, "data", "at most 1,000,000"),
    ],
    ids=["empty", "header-only", "ragged", "text", "nan", "overflow", "no-inputs", "rows", "size"],
)
def test_each_bad_file_is_refused_naming_the_cell(content, d_out, field, words):
    with pytest.raises(ConfigError) as caught:
        parse_csv(content, d_out)
    assert caught.value.field == field
    assert words in str(caught.value), str(caught.value)


BAD_FILES = [
    (b"", 1, "empty"),
    (b"a,b,c\n", 1, "header row and no data rows"),
    (b"1,2,3\n4,5\n", 1, "row 2 has 2 cells where row 1 has 3"),
    (b"x,y\n1,2\n3,abc\n", 1, "row 3, column 2 is 'abc', not a number"),
    (b"1,2\nnan,3\n", 1, "row 2, column 1 is 'nan'"),
    (("1,2\n" * 4097).encode(), 1, "4,097 data rows; at most 4,096"),
]


def test_each_bad_file_is_refused_through_the_api(client, tmp_path: Path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    for index, (content, d_out, words) in enumerate(BAD_FILES):
        path = tmp_path / f"bad{index}.csv"
        path.write_bytes(content)
        with pytest.raises(AppError) as caught:
            client.predict(
                0, 32, 8, d_out, 0.1, 1024.0, data=handle_file(str(path)), api_name="/step"
            )
        assert words in str(caught.value), (words, str(caught.value))


@pytest.mark.slow
def test_uploads_through_the_page_name_the_cell_then_fit_the_shapes(browser, app_url, tmp_path):
    from test_browser import ARTIFACTS

    from browser_waits import headline, wait_for_headline
    from helpers import open_page

    bad, good = tmp_path / "bad.csv", tmp_path / "good.csv"
    bad.write_text("x,y,t\n1,2,3\n4,oops,6\n")
    good.write_text(_csv(ROWS))
    from playwright.sync_api import expect

    def upload(page, path: Path) -> None:
        with page.expect_file_chooser() as chooser:
            page.locator("#data").get_by_text("Click to Upload").click()
        chooser.value.set_files(str(path))

    page = open_page(browser, app_url, 1400, 1000)
    try:
        shown = headline(page)
        upload(page, bad)
        # The bad file is named in the notice under the file input, the results marked stale.
        notice = page.locator("#data-notice")
        expect(notice).to_contain_text("row 3, column 2 is 'oops', not a number", timeout=90_000)
        expect(page.locator("#status .stale-banner")).to_contain_text(
            "fix data (its message says why)"
        )
        assert page.locator(".toast-body").count() == 0
        assert headline(page) == shown
    finally:
        page.close()
    # A fresh page at the defaults (D_out = 16, more than the file's 6 columns): the upload
    # adapts the shapes (its last column is the one target) and the controls show them. Then a
    # header naming two targets (y1, target) picks them, wherever they are.
    marked = tmp_path / "marked.csv"
    marked.write_text(_csv(ROWS).replace("c0,c1,c2,c3,c4,c5", "a,y1,b,c,d,target"))
    columns = {good: ([0, 1, 2, 3, 4], [5]), marked: ([0, 2, 3, 4], [1, 5])}
    for path, (inputs, targets) in columns.items():
        page = open_page(browser, app_url, 1400, 1000)
        try:
            upload(page, path)
            data = UserData(path.name, ROWS[:, inputs].astype(np.float32),
                            ROWS[:, targets].astype(np.float32))  # fmt: skip
            shapes = {"n": len(ROWS), "d_in": len(inputs), "d_out": len(targets)}
            expected = run_report(StepConfig(**shapes), data)
            wait_for_headline(page, f"{expected.mixed_new_loss:.7g}", 90_000)
            expect(page.locator("#headline")).to_contain_text(path.name)
            for name, value in shapes.items():
                expect(page.locator(f"#{name} input[type=number]")).to_have_value(str(value))
            page.screenshot(path=str(ARTIFACTS / f"upload_{path.stem}.png"))
        finally:
            page.close()


def test_uploaded_data_drives_the_step_through_the_api(client, tmp_path: Path):
    from gradio_client import handle_file

    path = tmp_path / "mine.csv"
    path.write_text(_csv(ROWS))
    settings = [0, 256, 64, 2, 0.05, 1024.0, 0, 1.0, 1.0, "bfloat16"]
    model = ["linear", 2, 64, "relu", "sgd"]
    # The file by name: it is the last input, after every setting (float8's came later).
    headline, summary, *_ = client.predict(
        *settings, *model, data=handle_file(str(path)), api_name="/step"
    )
    expected = run_report(
        StepConfig(n=40, d_in=4, d_out=2, lr=0.05), parse_csv(path.read_bytes(), 2)
    )
    assert summary["losses"]["mixed_new"] == expected.mixed_new_loss
    assert summary["config"]["n"] == 40 and summary["config"]["d_in"] == 4
    assert summary["data"] == {"source": "upload", "name": "mine.csv"}
    assert "your file `mine.csv`, 40 rows of 4 inputs and 2 targets" in headline
    # The same upload drives the sweep and the dynamics.
    upload = {"data": handle_file(str(path))}
    _, sweep, *_ = client.predict(*settings, *model, **upload, api_name="/sweep")
    assert sweep["config"]["n"] == 40
    run = [*settings, 5, "static", 100, *model]
    _, dynamics, *_ = client.predict(*run, **upload, api_name="/dynamics")
    assert dynamics["config"]["n"] == 40 and dynamics["steps"] == 5


def test_a_bad_upload_names_the_cell_and_the_server_keeps_serving(client, tmp_path: Path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    path = tmp_path / "bad.csv"
    path.write_text("a,b\n1,2\n3,oops\n")
    with pytest.raises(AppError) as caught:
        client.predict(0, 32, 8, 1, 0.1, 1024.0, data=handle_file(str(path)), api_name="/step")
    assert "row 3, column 2 is 'oops'" in str(caught.value)
    _, summary, *_ = client.predict(0, 32, 8, 4, 0.1, 1024.0, api_name="/step")
    assert summary["data"] == {"source": "synthetic"}


def test_a_path_outside_the_upload_folder_is_refused(app_url):
    """A raw call naming a server file (gradio_client would upload its own copy instead)."""
    import json

    import httpx

    from playground.core.settings.settings import defaults
    from playground.ui.arguments import STEP

    payload = {"path": "/etc/passwd", "meta": {"_type": "gradio.FileData"}}
    # Every setting, in the endpoint's order, then the file: the last input.
    data = [(defaults() | {"n": 32, "d_in": 8, "d_out": 1})[name] for name in STEP.before_data]
    with httpx.Client(base_url=app_url, timeout=60) as http:
        posted = http.post("gradio_api/call/step", json={"data": [*data, payload]})
        event_id = posted.json()["event_id"]
        stream = http.get(f"gradio_api/call/step/{event_id}").text
    events = [line.split(": ", 1) for line in stream.splitlines() if ": " in line]
    assert ["event", "error"] in [list(e) for e in events], stream
    message = json.loads(dict(events)["data"])
    assert "uploaded to this page" in str(message) and "root:" not in stream, stream


def _recorded_upload(visitor: str, name: str, content: bytes) -> Path:
    """A file written where Gradio writes an upload, recorded as ``visitor``'s (as the upload
    route's middleware records it)."""
    import tempfile

    from gradio.utils import get_upload_folder

    from playground.ui.uploads import record

    Path(get_upload_folder()).mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(dir=get_upload_folder())) / name
    path.write_bytes(content)
    record(visitor, [str(path)])
    return path


def _payload(path: Path, name: str | None = None) -> dict:
    return {"path": str(path), "orig_name": name or path.name, "meta": {"_type": "gradio.FileData"}}


def test_an_upload_refused_for_its_size_is_deleted():
    from playground.core.data.user_data import MAX_BYTES
    from playground.ui.uploads import admit

    path = _recorded_upload("192.0.2.1", "large.csv", b"1,2\n" * (MAX_BYTES // 4 + 1))
    with pytest.raises(ConfigError, match=f"at most {MAX_BYTES:,}"):
        admit("192.0.2.1", _payload(path))
    assert not path.exists()
    path.parent.rmdir()


def test_an_upload_is_parsed_once_per_d_out_and_named_by_its_file():
    """The page's events send the same path again and again: each gets the same data (the page's
    report cache knows it by identity), though the file left the disk at the first read."""
    from playground.ui.uploads import admit, upload_key, user_data

    path = _recorded_upload("192.0.2.1", "stored-name.csv", _csv(ROWS).encode())
    payload = _payload(path, "mine.csv")
    assert upload_key(None) is None and upload_key(42) is None  # no upload; refused later
    admit("192.0.2.1", payload, read=False)  # a validator's check: the file stays
    assert path.exists()
    admit("192.0.2.1", payload)
    assert not path.exists()  # read once, then deleted
    assert upload_key(str(path)) == (str(path), "mine.csv")  # as the handler receives it
    first = user_data(str(path), 2)
    admit("192.0.2.1", payload)  # the page's next event: the bytes in memory
    assert user_data(str(path), 2) is first
    again = user_data(str(path), 3)  # another split of the same bytes
    assert again is not first and again.y.shape == (len(ROWS), 3)
    np.testing.assert_array_equal(again.y, ROWS[:, 3:].astype(np.float32))
    path.parent.rmdir()


def test_an_upload_is_admitted_for_its_own_visitor_only_and_read_every_time_it_is_uploaded():
    from playground.ui.uploads import admit, record

    path = _recorded_upload("192.0.2.1", "mine.csv", _csv(ROWS).encode())
    with pytest.raises(ConfigError, match="you uploaded to this page") as caught:
        admit("192.0.2.2", _payload(path))  # another visitor: neither read nor deleted
    assert caught.value.field == "data" and path.exists()
    admit("192.0.2.1", _payload(path))
    assert not path.exists()
    path.write_bytes(_csv(ROWS).encode())  # the identical file uploaded again: the same path
    record("192.0.2.1", [str(path)])
    admit("192.0.2.1", _payload(path))
    assert not path.exists()  # read, and deleted, again
    with pytest.raises(ConfigError, match="you uploaded to this page"):
        admit("192.0.2.2", _payload(path))  # the bytes in memory are no other visitor's
    path.parent.rmdir()


def test_only_paths_in_the_upload_folder_outside_the_downloads_are_recorded(tmp_path: Path):
    """A path the upload route could never have written is no upload, whatever its record."""
    from playground.ui.uploads import admit, record
    from playground.views.file_store import download_dir

    outside = tmp_path / "outside.csv"
    download = Path(download_dir()) / "recorded.csv"
    for path in (outside, download):
        path.write_bytes(_csv(ROWS).encode())
        record("192.0.2.1", [str(path)])
        with pytest.raises(ConfigError, match="you uploaded to this page"):
            admit("192.0.2.1", _payload(path))
        assert path.is_file()
    download.unlink()


def test_one_visitors_many_uploads_never_push_out_anothers_record():
    from playground.ui.uploads import VISITOR_RECORDS, admit

    theirs = _recorded_upload("192.0.2.7", "theirs.csv", _csv(ROWS).encode())
    mine = [
        _recorded_upload("192.0.2.8", f"mine-{index}.csv", _csv(ROWS).encode())
        for index in range(VISITOR_RECORDS + 1)
    ]
    with pytest.raises(ConfigError, match="you uploaded to this page"):
        admit("192.0.2.8", _payload(mine[0]))  # the visitor's oldest, past its bound
    for path in [theirs, mine[-1]]:
        admit("192.0.2.7" if path == theirs else "192.0.2.8", _payload(path))
        assert not path.exists()
    for path in [theirs, *mine]:
        path.unlink(missing_ok=True)
        path.parent.rmdir()


def test_another_file_input_is_admitted_once_and_left_for_its_handler():
    """A file input the module does not read (outside READ_HERE) is checked the same way,
    named in each refusal, and its file stays on disk for its own handler to read."""
    from playground.ui.uploads import READ_HERE, admit

    assert "file" not in READ_HERE
    path = _recorded_upload("192.0.2.1", "model.safetensors", b"\x08\x00")
    with pytest.raises(ConfigError, match="^file must be a file you uploaded") as caught:
        admit("192.0.2.2", _payload(path), field="file")
    assert caught.value.field == "file"
    admit("192.0.2.1", _payload(path), field="file")
    assert path.is_file()  # its handler reads it
    with pytest.raises(ConfigError, match="^file must be a file you uploaded"):
        admit("192.0.2.1", _payload(path), field="file")  # one event per upload
    with pytest.raises(ConfigError, match="^file must be an uploaded file"):
        admit("192.0.2.1", "", field="file")
    path.unlink()
    path.parent.rmdir()
