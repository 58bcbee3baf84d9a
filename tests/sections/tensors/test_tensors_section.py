"""The Your tensors section: its JSON (strict, every registered format and block recipe, the
contract's keys), its sentences (computed numbers, names escaped), its table and its figure
(the step's fixed axis, one strip per format, every entry in a bar)."""

from __future__ import annotations

import io
import json
import math

import ml_dtypes
import numpy as np
from safetensors.numpy import save

from playground.core.formats.dtypes import BLOCK_ELEMENT_FORMATS, DTYPES
from playground.core.recipes.registry import RECIPES
from playground.core.tensors.report import analyse_file
from playground.sections.lab.charts import fixed_binade_span
from playground.sections.tensors.charts import tensor_figure
from playground.sections.tensors.summary import percent
from playground.sections.tensors.tab import tensors_views

FORMATS = list(DTYPES + BLOCK_ELEMENT_FORMATS)
BLOCKS = [name for name, entry in RECIPES.items() if entry.block is not None]
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
    assert summary["formats"] == FORMATS and summary["recipes"] == BLOCKS
    assert summary["sampled"] is False
    rows = {row["name"]: row for row in summary["tensors"]}
    assert set(rows) == set(TENSORS)
    for name, values in TENSORS.items():
        assert rows[name]["shape"] == list(values.shape)
    assert rows["ids"]["dtype"] == "I32" and rows["ids"]["analysed"] is False
    grad = rows["layers.3.mlp`grad"]
    assert grad["dtype"] == "F32" and set(grad["formats"]) == set(FORMATS)
    assert set(grad["recipes"]) == set(BLOCKS)
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
    said = f"{percent(share)} of `layers.3.mlp&#96;grad`'s nonzero entries round to 0 in float16"
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
    assert [row[0] for row in rows] == result.tensor_names
    assert headers[:5] == ["tensor", "dtype", "shape", "log2 max", "log2 min"]
    assert len(headers) == 5 + len(FORMATS) + len(BLOCKS)
    grad = rows[result.tensor_names.index("layers.3.mlp`grad")]
    live = np.abs(TENSORS["layers.3.mlp`grad"].astype(np.float64))
    assert grad[3] == round(math.log2(live.max()), 2) and grad[4] == round(math.log2(live.min()), 2)


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
