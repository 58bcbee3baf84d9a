"""The app's own versions of what it once read from Gradio's submodules, each checked against
the peer it replaces: what gr.Plot sends, gradio_client's file-payload test, Gradio's folder."""

from __future__ import annotations

import json
import os
import tempfile

import gradio as gr
import plotly.graph_objects as go
import pytest
from gradio_client.utils import is_file_obj_with_meta

from playground.ui.public import _is_file_payload
from playground.ui.widgets import as_plot
from playground.views.file_store import gradio_folder, inside


def test_a_chart_value_reaches_the_browser_as_gradio_sends_a_plotly_figure():
    figure = {
        "data": [{"type": "bar", "x": [1, 2], "y": [3.5, 4.0]}],
        "layout": {"title": {"text": "t"}},
    }
    sent = gr.Plot().postprocess(as_plot(figure)).model_dump()
    assert sent["type"] == "plotly"
    ours = json.loads(sent["plot"])
    assert ours["data"] == figure["data"] and ours["layout"]["title"] == {"text": "t"}
    go.Figure(ours)  # a valid figure: raises ValueError on any invalid property
    # As gr.Plot sends the same figure built by plotly itself.
    plotly = json.loads(gr.Plot().postprocess(go.Figure(ours)).model_dump()["plot"])
    assert plotly["data"][0]["y"] == ours["data"][0]["y"]


@pytest.mark.parametrize(
    "item",
    [
        gr.FileData(path="/tmp/a.csv").model_dump(),
        {"path": "/tmp/a.csv", "meta": {"_type": "gradio.FileData"}},
        {"path": "/tmp/a.csv"},
        {"path": 3, "meta": {"_type": "gradio.FileData"}},
        {"path": "/tmp/a.csv", "meta": {"_type": "other"}},
        {"meta": {"_type": "gradio.FileData"}},
        "/tmp/a.csv",
        None,
        [],
    ],
    ids=str,
)
def test_the_file_payload_check_agrees_with_gradio_clients(item):
    assert _is_file_payload(item) == bool(is_file_obj_with_meta(item))


def test_a_meta_that_is_no_dict_is_no_file_payload():
    # gradio_client's own test raises AttributeError on it; the app's says no.
    assert not _is_file_payload({"path": "/tmp/a.csv", "meta": "gradio.FileData"})


def test_gradios_folder_is_its_documented_setting_else_the_system_temp(monkeypatch, tmp_path):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path))
    assert gradio_folder() == str(tmp_path)
    monkeypatch.delenv("GRADIO_TEMP_DIR")
    assert gradio_folder() == os.path.join(tempfile.gettempdir(), "gradio")


def test_inside_resolves_dots_and_links(tmp_path):
    (tmp_path / "up").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "up" / "link").symlink_to(tmp_path / "elsewhere")
    assert inside(tmp_path / "up" / "a", tmp_path / "up")
    assert inside(tmp_path / "up", tmp_path / "up")
    assert not inside(tmp_path / "up" / ".." / "b", tmp_path / "up")
    assert not inside(tmp_path / "up" / "link" / "c", tmp_path / "up")
    assert not inside(tmp_path, tmp_path / "up")
