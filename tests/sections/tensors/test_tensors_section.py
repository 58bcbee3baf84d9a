"""The Your tensors section: its JSON (strict, every value format and the inspect command's six
recipes with its statistics, checked against a float64 reference; the contract's keys), its
sentences (computed numbers, non-finite entries and samples named, names escaped), its table and
its figure (the step's fixed axis, one strip per format, every entry in a bar)."""

from __future__ import annotations

import io
import json

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save

from playground.core.formats.dtypes import BLOCK_ELEMENT_FORMATS, DTYPES
from playground.core.tensors.report import analyse_file
from playground.sections.lab.charts import fixed_binade_span
from playground.sections.tensors.charts import tensor_figure
from playground.sections.tensors.summary import code, percent
from playground.sections.tensors.tab import tensors_views
from tests.recipe_reference import reference

FORMATS = list(DTYPES + BLOCK_ELEMENT_FORMATS)
# The inspect command's recipes, as ../shared/CONTRACTS.md names them.
RECIPES = ["bfloat16", "float16", "float8_current", "mxfp8", "fp8_block", "nvfp4"]
STATISTICS = ["underflow", "overflow", "rel_error", "mse", "scale_min", "scale_max"]
RNG = np.random.default_rng(3)
TENSORS = {
    "layers.3.mlp`grad": (RNG.standard_normal((16, 40)) * 1e-7).astype(np.float32),
    "act": np.array([1.0, np.inf, np.nan, 7e4, 0.0], np.float32),
    "zeros": np.zeros(4, ml_dtypes.bfloat16),
    "ids": np.arange(3, dtype=np.int32),
}


def views():
    content = save(TENSORS)
    return tensors_views(analyse_file(io.BytesIO(content), len(content), "model.safetensors"))


def test_the_json_is_strict_and_has_every_registered_format_and_recipe():
    summary = json.loads(json.dumps(views().tensors_json, allow_nan=False))
    assert summary["formats"] == FORMATS and summary["recipes"] == RECIPES
    assert summary["sampled"] is False
    assert summary["command"].startswith("python -m playground inspect PATH")
    rows = {row["name"]: row for row in summary["tensors"]}
    assert set(rows) == set(TENSORS)
    for name, values in TENSORS.items():
        assert rows[name]["shape"] == list(values.shape)
    assert rows["ids"]["dtype"] == "I32" and rows["ids"]["analysed"] is False
    grad = rows["layers.3.mlp`grad"]
    assert grad["dtype"] == "F32" and set(grad["formats"]) == set(FORMATS)
    assert list(grad["recipes"]) == RECIPES
    matrix = TENSORS["layers.3.mlp`grad"].astype(np.float64)  # a gradient: E5M2, 1-D blocks
    for recipe in RECIPES:
        want = reference(matrix, recipe, gradient=True)
        exact = recipe in ("bfloat16", "float16", "float8_current", "mxfp8")
        for key in STATISTICS:
            assert grad["recipes"][recipe][key] == pytest.approx(
                want[key], rel=1e-12 if exact else 2e-5, abs=0
            ), (recipe, key)
    assert rows["act"]["nonfinite"] == {"nan": 1, "posinf": 1, "neginf": 0}
    assert grad["nonfinite"] == {"nan": 0, "posinf": 0, "neginf": 0}
    live = TENSORS["layers.3.mlp`grad"]
    expected = np.count_nonzero(live.astype(np.float16) == 0) / live.size
    assert grad["formats"]["float16"]["zero"] == expected
    assert rows["act"]["magnitude"]["nonfinite"] == 2 and rows["act"]["magnitude"]["zeros"] == 1
    assert rows["act"]["formats"]["float16"]["overflow"] == 1 / 2  # 7e4 of 1 and 7e4
    assert rows["zeros"]["formats"]["float16"]["zero"] is None  # no nonzero entry to count


def test_sentences_quote_the_counts_and_escape_backticks_in_names():
    result = views()
    live = TENSORS["layers.3.mlp`grad"]
    share = np.count_nonzero(live.astype(np.float16) == 0) / live.size
    assert result.tensor_name == "layers.3.mlp`grad"  # the most lost to zero is shown first
    said = f"float16: {percent(share)} of `layers.3.mlp&#96;grad`'s nonzero entries round to 0"
    assert said in result.tensor_reading
    row = next(r for r in result.tensors_json["tensors"] if r["name"] == "layers.3.mlp`grad")
    window = row["formats"]["float16"]["loss_scale_window"]
    assert f"S = 2^{window['low_log2']} to 2^{window['high_log2']} keeps them" in (
        result.tensor_reading
    )
    for line in result.tensor_reading.splitlines() + result.tensors_reading.splitlines():
        assert line.count("`") % 2 == 0, line


def test_the_table_has_a_row_per_tensor_in_the_files_order():
    result = views()
    headers, rows = result.tensors_table["headers"], result.tensors_table["data"]
    assert [row[0].split("<br>")[0] for row in rows] == [code(n) for n in result.tensor_names]
    assert headers == ["tensor", "non-finite", *RECIPES, "keep high"]
    grad = dict(zip(headers, rows[result.tensor_names.index("layers.3.mlp`grad")], strict=True))
    matrix = TENSORS["layers.3.mlp`grad"].astype(np.float64)
    for recipe in RECIPES:
        underflow = reference(matrix, recipe, gradient=True)["underflow"]
        assert grad[recipe] == pytest.approx(round(100 * underflow, 3), abs=1e-9)
    act = dict(zip(headers, rows[result.tensor_names.index("act")], strict=True))
    assert act["non-finite"] == "1 NaN and 1 +inf" and act["tensor"] == "`act`<br>5 F32"
    assert grad["tensor"].endswith("<br>16x40 F32")


def _one_file(tensors: dict[str, np.ndarray]):
    content = save(tensors)
    return analyse_file(io.BytesIO(content), len(content), "mine.safetensors")


def test_a_conv_weight_is_read_as_its_matmul_and_scaled_fp8_is_not_the_plain_cast():
    """A conv weight (16, 8, 3, 3): its recipes' statistics are those of the 16 x 72 matrix its
    matmul multiplies; float8_current (amax to 448) loses far fewer small entries than the
    unscaled float8_e4m3fn cast, and the sentences say which is which."""
    conv = RNG.standard_normal((16, 8, 3, 3)) * 2.0 ** RNG.integers(-14, -4, (16, 8, 3, 3))
    conv = conv.astype(np.float32)
    report = _one_file({"conv.weight": conv})
    (row,) = tensors_views(report).tensors_json["tensors"]
    matrix = conv.reshape(16, 72).astype(np.float64)
    for recipe in RECIPES:
        want = reference(matrix, recipe, gradient=False)
        exact = recipe in ("bfloat16", "float16", "float8_current", "mxfp8")
        assert row["recipes"][recipe]["rel_error"] == pytest.approx(
            want["rel_error"], rel=1e-12 if exact else 2e-5
        ), recipe
    plain = np.count_nonzero(conv.astype(ml_dtypes.float8_e4m3fn) == 0) / conv.size
    assert row["formats"]["float8_e4m3fn"]["zero"] == plain
    assert row["recipes"]["float8_current"]["underflow"] < plain / 4
    reading = tensors_views(report).tensor_reading
    assert "float8_e4m3fn (an unscaled cast; training scales first)" in reading


def test_a_large_tensor_is_sampled_and_said_so_with_its_nonfinite_counted_whole():
    big = (RNG.standard_normal((2048, 1024)) * 0.02).astype(ml_dtypes.bfloat16)  # 2 M values
    big[2047, 1023] = np.nan  # the last row: outside an even sample of row groups
    big[0, 0] = np.inf
    report = _one_file({"big.weight": big})
    result = tensors_views(report)
    summary = json.loads(json.dumps(result.tensors_json, allow_nan=False))
    (row,) = summary["tensors"]
    assert summary["sampled"] is True and row["sampled"] is True
    assert row["analysed_values"] <= 2**20 and row["analysed_values"] % 1024 == 0
    assert row["nonfinite"] == {"nan": 1, "posinf": 1, "neginf": 0}
    assert f"a sample of {row['analysed_values']:,}" in result.tensor_reading
    assert "1 NaN and 1 +inf (of 2,097,152 values)" in result.tensor_reading
    assert "`big.weight`: 1 NaN and 1 +inf" in result.tensors_reading
    assert "python -m playground inspect PATH" in result.tensors_reading


def test_the_figure_keeps_the_steps_fixed_axis_and_counts_every_entry():
    content = save(TENSORS)
    report = analyse_file(io.BytesIO(content), len(content), "model.safetensors")
    for tensor in report.tensors:
        figure = tensor_figure(tensor, "float16")
        if tensor.magnitudes is None:
            assert figure["data"] == []
            continue
        bars, *strips = figure["data"]
        assert sum(bars["y"]) == tensor.magnitudes.size
        low, high = fixed_binade_span()
        shown = figure["layout"]["xaxis"]["range"]
        assert shown[0] < low and shown[1] > high
        assert [strip["y"] for strip in strips] == [FORMATS, FORMATS]
        assert "float16" in figure["layout"]["title"]["text"]
