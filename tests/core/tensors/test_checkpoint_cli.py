"""``python -m playground inspect PATH``: the JSON contract, strict JSON, the HTML report, bad
input (exit code 2) and a hub id resolved from the hub cache's layout (playground/__main__.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from playground.__main__ import main

RNG = np.random.default_rng(3)
TENSOR_KEYS = {"name", "shape", "dtype", "nonfinite", "recipes"}
STAT_KEYS = {"underflow", "overflow", "rel_error", "mse", "scale_min", "scale_max"}
# The recipes the command line contract (shared/CONTRACTS.md) names, written here, not read.
CONTRACT_RECIPES = {"bfloat16", "float16", "float8_current", "mxfp8", "fp8_block", "nvfp4"}


def _weights() -> dict[str, np.ndarray]:
    nan = np.ones((4, 32), np.float32)
    nan[0, 0], nan[1, 1] = np.nan, -np.inf
    return {
        "embed.weight": (RNG.standard_normal((64, 96)) * 0.02).astype(ml_dtypes.bfloat16),
        "zero.bias": np.zeros(16, np.float32),
        "odd.weight": nan,
    }


def _refuse_constants(token: str):
    raise ValueError(f"not strict JSON: {token}")


@pytest.fixture
def model(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    save_file(_weights(), folder / "model.safetensors")
    (folder / "config.json").write_text("{}")
    return folder


def test_inspect_writes_the_contract_as_strict_json(model, tmp_path, capsys):
    out = tmp_path / "out.json"
    assert main(["inspect", str(model), "--json", str(out)]) == 0
    record = json.loads(out.read_text(), parse_constant=_refuse_constants)
    assert set(record) == {"tensors", "keep_high_precision", "values_per_second"}
    assert record["values_per_second"] > 0
    rows = {row["name"]: row for row in record["tensors"]}
    assert set(rows) == set(_weights())
    for row in rows.values():
        assert set(row) == TENSOR_KEYS
        assert set(row["recipes"]) == CONTRACT_RECIPES
        assert all(set(stats) == STAT_KEYS for stats in row["recipes"].values())
    assert rows["embed.weight"]["shape"] == [64, 96] and rows["embed.weight"]["dtype"] == "BF16"
    assert rows["odd.weight"]["nonfinite"] == {"nan": 1, "posinf": 0, "neginf": 1}
    # An all-zero tensor has no relative error and no live block: null, never NaN.
    assert rows["zero.bias"]["recipes"]["nvfp4"]["rel_error"] is None
    assert rows["zero.bias"]["recipes"]["mxfp8"]["scale_min"] is None
    assert "inspect: 3/3 tensors" in capsys.readouterr().err


def test_inspect_prints_the_json_without_json_out_and_writes_one_offline_html(
    model, tmp_path, capsys
):
    page = tmp_path / "report.html"
    assert main(["inspect", str(model / "model.safetensors"), "--html", str(page)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert len(record["tensors"]) == 3
    text = page.read_text()
    assert text.count("plotly.js v") == 1  # the bundle, inline, once
    assert "<script src=" not in text  # nothing fetched from a network
    assert "embed.weight" in text
    # One row per FP8/FP4 recipe in the by-recipe table, as the command's JSON gives it.
    for recipe in ("float8_current", "mxfp8", "fp8_block", "nvfp4"):
        assert f"<tr><td>{recipe}</td>" in text


def test_thresholds_are_options(model, capsys):
    assert main(["inspect", str(model), "--underflow", "1", "--mse", "1"]) == 0
    assert json.loads(capsys.readouterr().out)["keep_high_precision"] == []
    assert main(["inspect", str(model), "--underflow", "1", "--mse", "0"]) == 0
    assert "embed.weight" in json.loads(capsys.readouterr().out)["keep_high_precision"]


@pytest.mark.parametrize("case", ["missing", "empty folder", "malformed index", "not safetensors"])
def test_bad_input_is_one_line_on_stderr_and_exit_code_2(tmp_path, case):
    path = tmp_path / "missing"
    if case != "missing":
        path = tmp_path / "folder"
        path.mkdir()
    if case == "malformed index":
        (path / "model.safetensors.index.json").write_text('{"weight_map": 3}')
    if case == "not safetensors":
        path = tmp_path / "model.safetensors"
        path.write_bytes(b"\xff" * 20)
    result = subprocess.run(
        [sys.executable, "-m", "playground", "inspect", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and "Traceback" not in result.stderr
    assert str(path.name) in result.stderr


@pytest.mark.slow
def test_a_hub_id_resolves_from_the_hub_cache_layout(tmp_path):
    revision = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--acme--tiny"
    snapshot = repo / "snapshots" / revision
    snapshot.mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(revision)
    save_file(_weights(), snapshot / "model.safetensors")
    (snapshot / "config.json").write_text("{}")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    for target in ("acme/tiny", str(repo)):
        result = subprocess.run(
            [sys.executable, "-m", "playground", "inspect", target],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )
        assert result.returncode == 0, result.stderr
        names = {row["name"] for row in json.loads(result.stdout)["tensors"]}
        assert names == set(_weights())
    missing = subprocess.run(
        [sys.executable, "-m", "playground", "inspect", "acme/absent"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert missing.returncode == 2 and "acme/absent" in missing.stderr
