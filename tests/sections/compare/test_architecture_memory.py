"""A real transformer's memory as the Compare section shows it (sections.compare.memory): one
stacked bar per recipe whose parts add up to the ledger's total, a table of bytes per
parameter, and the ``architecture`` section of /compare's JSON, one ledger per recipe."""

from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from playground.core.compare.architecture import architecture
from playground.core.compare.architecture_ledger import TrainingSetup, architecture_memory
from playground.core.recipes.registry import RECIPES
from playground.sections.compare.memory import (
    BAR_PARTS,
    TABLE_CORNER,
    architecture_figure,
    architecture_json,
    architecture_table,
)


@pytest.fixture(scope="module")
def memory():
    return architecture_memory(architecture({}), TrainingSetup(optimizer="adam"))


def test_one_stacked_bar_per_recipe_adding_up_to_its_total(memory):
    figure = architecture_figure(memory)
    go.Figure(figure)  # a valid Plotly figure
    assert figure["layout"]["barmode"] == "stack"
    assert [trace["name"] for trace in figure["data"]] == [label for label, _ in BAR_PARTS.values()]
    for trace in figure["data"]:
        assert trace["x"] == list(RECIPES)
    for index, ledger in enumerate(memory.ledgers):
        stacked = sum(trace["y"][index] for trace in figure["data"])
        assert stacked * 2**30 == pytest.approx(ledger.total_bytes)
    # the bfloat16 bar's optimizer part: Adam's two float32 moments, 8 bytes per parameter
    optimizer = next(t for t in figure["data"] if t["name"] == "optimizer state")
    assert optimizer["customdata"][0] == 8
    assert "1.24B-parameter llama-family" in figure["layout"]["title"]["text"]


def test_the_table_has_a_column_per_recipe_with_its_bytes_per_parameter(memory):
    table = architecture_table(memory)
    assert "1,235,814,400 parameters" in table and "s = 4,096, b = 1" in table
    rows = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in table.splitlines()
        if line.startswith("| ") and "---" not in line
    ]
    assert rows[0] == [TABLE_CORNER, *RECIPES]
    per_param = [float(cell.strip("*")) for cell in rows[1][1:]]
    assert per_param == pytest.approx([ledger.bytes_per_param for ledger in memory.ledgers], 1e-3)
    by_part = {row[0]: row[1:] for row in rows[2:]}
    assert by_part["optimizer state"][0] == "8" and by_part["float32 master weights"][0] == "4"
    assert per_param[0] == 2 + 2 + 4 + 8  # ZeRO's 16
    assert len(rows) == 2 + len(memory.ledgers[0].parts) + 3  # the parts, then three totals


def test_the_json_section_holds_one_ledger_per_recipe(memory):
    section = json.loads(json.dumps(architecture_json(memory), allow_nan=False))
    assert section["parameters"] == 1_235_814_400
    assert [entry["recipe"] for entry in section["memory"]] == list(RECIPES)
    assert all("bytes_per_param" in entry for entry in section["memory"])
    assert section["setup"]["sequence_length"] == 4096 and section["model"]["family"] == "llama"
    qkv = section["weights"][0]
    assert qkv == {"name": "qkv", "shape": [2048, 3072], "count": 16, "quantized": True}
