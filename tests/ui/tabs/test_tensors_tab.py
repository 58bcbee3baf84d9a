"""The tensors tab's wiring without a server: an upload is read once and deleted whether it is
read or refused, a file not named .safetensors or outside Gradio's upload folder is refused by
name, and the docs show the endpoint's input (docs/calling.md), the page's two save lines
(docs/using.md) and the caps (docs/public.md)."""

from __future__ import annotations

import inspect
import math
import pathlib
import re

import gradio as gr
import numpy as np
import pytest
from gradio.utils import get_upload_folder
from safetensors.numpy import save

from playground.core.caps import (
    TENSOR_FILE_MAX_BYTES,
    TENSOR_NAME_MAX_CHARS,
    TENSOR_SAMPLE_VALUES,
    TENSORS_MAX_COUNT,
    TENSORS_MAX_ELEMENTS,
)
from playground.sections.tensors.tab import SAVE_JAX, SAVE_TORCH
from playground.ui.launch import MAX_FILE_SIZE
from playground.ui.tabs.tensors import tensors_endpoint

DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs"


def uploaded(name: str, content: bytes) -> pathlib.Path:
    folder = pathlib.Path(get_upload_folder()) / "tensors-tab-test"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(content)
    return path


def test_an_upload_is_analysed_then_deleted():
    path = uploaded("w.safetensors", save({"w": np.float32([1.0, 1e-8])}))
    summary, reading = tensors_endpoint({"path": str(path), "orig_name": "w.safetensors"})
    assert summary["tensors"][0]["formats"]["float16"]["zero"] == 0.5
    assert "`w.safetensors` holds 1 tensor;" in reading
    assert not path.exists()


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("w.npy", save({"w": np.ones(2, np.float32)}), "file 'w.npy': only .safetensors files"),
        ("cut.safetensors", save({"w": np.ones(2, np.float32)})[:-1], "it is truncated"),
    ],
)
def test_a_refused_upload_is_named_and_deleted(name, content, words):
    path = uploaded(name, content)
    with pytest.raises(gr.Error) as caught:
        tensors_endpoint({"path": str(path), "orig_name": name})
    assert words in str(caught.value) and name in str(caught.value)
    assert not path.exists()


def test_a_path_outside_the_uploads_is_refused_and_left_alone(tmp_path):
    outside = tmp_path / "x.safetensors"
    outside.write_bytes(save({"w": np.ones(2, np.float32)}))
    with pytest.raises(gr.Error, match="file must be a file uploaded to this page"):
        tensors_endpoint({"path": str(outside)})
    with pytest.raises(gr.Error, match="file: upload a .safetensors file"):
        tensors_endpoint(None)
    assert outside.exists()


def test_the_docs_show_the_input_the_save_lines_and_the_caps():
    calling, using, public = (
        (DOCS / f"{name}.md").read_text() for name in ("calling", "using", "public")
    )
    assert list(inspect.signature(tensors_endpoint).parameters) == ["file"]
    assert re.search(r"^/tensors\s+file\b", calling, re.M)
    assert SAVE_TORCH in using and SAVE_JAX in using
    row = next(line for line in public.splitlines() if line.startswith("| a safetensors file ("))
    megabytes = TENSOR_FILE_MAX_BYTES / 2**20
    assert f"at most {megabytes:g} MB" in row and f"{TENSORS_MAX_COUNT} tensors" in row
    assert f"a tensor over 2^{math.log2(TENSOR_SAMPLE_VALUES):g} values" in row
    assert f"a file over 2^{math.log2(TENSORS_MAX_ELEMENTS):g} values together" in row
    assert f"at most {TENSOR_NAME_MAX_CHARS} characters" in row
    assert f"{megabytes:g}mb" == MAX_FILE_SIZE  # the file cap is the page's upload cap
