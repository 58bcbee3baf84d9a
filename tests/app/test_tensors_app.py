"""The ``/tensors`` endpoint on the launched app: through gradio_client (``handle_file``) and raw
HTTP, a real model's gradients come back with the counts ml_dtypes makes; a truncated, foreign
or misnamed file is refused by name; every upload is deleted once read or refused; the server
keeps serving."""

from __future__ import annotations

import json
import os

import httpx
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from http_calls import call, visitor

VISITOR = visitor("198.51.100.35")


def gradients_file(path) -> dict[str, np.ndarray]:
    """A small torch model's gradients after one backward(), saved with safetensors."""
    torch.manual_seed(7)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    loss = torch.nn.functional.mse_loss(model(torch.randn(16, 8)), torch.randn(16, 2)) * 2.0**-26
    loss.backward()
    grads = {name: p.grad.contiguous() for name, p in model.named_parameters()}
    grads["head.weight.half"] = model[2].weight.detach().half()
    grads["head.weight.bf16"] = model[2].weight.detach().bfloat16()
    save_file(grads, str(path))
    return {name: value.float().numpy() for name, value in grads.items()}


def zero_share(values: np.ndarray) -> float:
    live = values[values != 0]
    return float(np.count_nonzero(live.astype(np.float16) == 0)) / live.size


def check_rows(summary: dict, tensors: dict[str, np.ndarray], dtypes: dict[str, str]) -> None:
    rows = {row["name"]: row for row in summary["tensors"]}
    assert set(rows) == set(tensors)
    for name, values in tensors.items():
        assert rows[name]["shape"] == list(values.shape)
        assert rows[name]["dtype"] == dtypes.get(name, "F32")
        assert rows[name]["formats"]["float16"]["zero"] == zero_share(values), name


DTYPES = {"head.weight.half": "F16", "head.weight.bf16": "BF16"}


def test_gradients_through_gradio_client(client, tmp_path):
    from gradio_client import handle_file

    tensors = gradients_file(tmp_path / "grads.safetensors")
    summary, reading = client.predict(
        handle_file(str(tmp_path / "grads.safetensors")), api_name="/tensors"
    )
    check_rows(summary, tensors, DTYPES)
    assert summary["file"] == "grads.safetensors"
    assert f"`grads.safetensors` holds {len(tensors)} tensors" in reading
    assert max(zero_share(v) for v in tensors.values()) > 0  # float16 flushes some of them


def upload(url: str, name: str, content: bytes) -> str:
    """The server path of ``content`` uploaded as ``name`` (Gradio's upload route)."""
    response = httpx.post(
        f"{url}gradio_api/upload",
        files={"files": (name, content, "application/octet-stream")},
        headers=VISITOR,
        timeout=60,
    )
    assert response.status_code == 200, response.text[:200]
    return response.json()[0]


def file_data(path: str, name: str) -> dict:
    return {"path": path, "orig_name": name, "meta": {"_type": "gradio.FileData"}}


def test_gradients_through_raw_http_and_the_upload_is_deleted(app_url, tmp_path):
    tensors = gradients_file(tmp_path / "grads.safetensors")
    content = (tmp_path / "grads.safetensors").read_bytes()
    path = upload(app_url, "grads.safetensors", content)
    answer = call(app_url, "tensors", [file_data(path, "grads.safetensors")], VISITOR)
    assert answer.kind == "complete", answer.message
    check_rows(answer.payload[0], tensors, DTYPES)
    json.dumps(answer.payload[0], allow_nan=False)
    assert not os.path.exists(path), "the upload stayed on disk after it was read"


def refusals(tmp_path) -> list[tuple[str, bytes, str]]:
    gradients_file(tmp_path / "grads.safetensors")
    valid = (tmp_path / "grads.safetensors").read_bytes()
    return [
        ("cut.safetensors", valid[:-10], "'cut.safetensors' is not a safetensors file"),
        ("data.safetensors", b"x,y\n1,2\n3,4\n", "its first 8 bytes give a header of"),
        ("grads.npy", valid, "'grads.npy': only .safetensors files are read here"),
    ]


def test_bad_files_are_refused_by_name_and_deleted(app_url, tmp_path):
    for name, content, words in refusals(tmp_path):
        path = upload(app_url, name, content)
        answer = call(app_url, "tensors", [file_data(path, name)], VISITOR)
        assert answer.kind == "error" and words in answer.message, (name, answer.message)
        assert not os.path.exists(path), f"{name} stayed on disk after it was refused"
    assert call(
        app_url, "tensors", [file_data("/etc/hostname", "x.safetensors")], VISITOR
    ).kind == ("error")
    assert os.path.exists("/etc/hostname")  # a path outside the uploads is never touched
    assert call(app_url, "ping", [], VISITOR).kind == "complete"  # still serving


def test_a_truncated_file_is_refused_through_gradio_client(client, tmp_path):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    name, content, words = refusals(tmp_path)[0]
    (tmp_path / name).write_bytes(content)
    with pytest.raises(AppError) as caught:
        client.predict(handle_file(str(tmp_path / name)), api_name="/tensors")
    assert words in str(caught.value) and "truncated" in str(caught.value)


@pytest.mark.slow
def test_a_4096_square_bfloat16_layer_is_read_sampled_and_said_so(client, tmp_path):
    """One 4096 x 4096 bfloat16 layer (32 MB, past the old 2 MB cap) with a NaN in its last
    row: analysed on a sample, its NaN counted over every value, the command named."""
    from gradio_client import handle_file

    layer = torch.randn(4096, 4096, generator=torch.Generator().manual_seed(5)) * 0.02
    layer[4095, 4095] = float("nan")
    path = tmp_path / "layer.safetensors"
    save_file({"model.layers.0.mlp.up_proj.weight": layer.bfloat16()}, str(path))
    assert os.path.getsize(path) > 32 * 2**20
    summary, reading = client.predict(handle_file(str(path)), api_name="/tensors")
    (row,) = summary["tensors"]
    assert summary["sampled"] is True and row["sampled"] is True
    assert 0 < row["analysed_values"] <= 2**20
    assert row["nonfinite"] == {"nan": 1, "posinf": 0, "neginf": 0}
    assert "1 NaN" in reading and "python -m playground inspect PATH" in reading
    # float8_current's underflow of this normal layer, scaled amax -> 448, is tiny; the
    # unscaled float8 cast flushes far more of its small entries.
    assert row["recipes"]["float8_current"]["underflow"] < (row["formats"]["float8_e4m3fn"]["zero"])
