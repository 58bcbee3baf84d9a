"""The lab's counts, note and magnitude figure for a block recipe: what its block scales keep,
checked at the defaults against a block quantizer written apart (tests/block_reference.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from block_reference import E2M1, block_elements

from playground import StepConfig, run_report
from playground.sections.lab.charts import BLOCK_BANDS, magnitude_histogram
from playground.sections.lab.tab import magnitude_table


@pytest.fixture(scope="module")
def nvfp4():
    return run_report(StepConfig(compute_dtype="nvfp4"))  # every other setting at its default


def _shown(table: str, kind: str) -> list[str]:
    row = next(line for line in table.splitlines() if line.startswith(f"| {kind} |"))
    return [cell.strip() for cell in row.split("|")[2:-1]]


def test_nvfp4s_lost_share_at_the_defaults_is_what_its_blocks_lose(nvfp4):
    params = list(nvfp4.params.values())
    total = sum(p.size for p in params)
    lost = {}
    for view, arrays in (
        ("float32", [p.float32_grads for p in params]),
        ("scaled", [p.scaled_grads for p in params]),
    ):
        lost[view] = sum(
            int(np.sum((base.ravel() != 0) & (block_elements(values, "nvfp4") == 0)))
            for values, base in zip(arrays, [p.float32_grads for p in params], strict=True)
        )
    table = magnitude_table(nvfp4)
    assert _shown(table, "lost to zero") == [
        f"{lost[view] / total:.1%} ({lost[view]:,})" for view in ("float32", "scaled")
    ]
    # Far from the 100% a plain cast to E2M1 loses: these gradients are all under its 0.25.
    plain = np.concatenate([p.float32_grads.ravel() for p in params]).astype(E2M1)
    assert np.all(plain.astype(np.float32) == 0) and 0 < lost["float32"] < total / 4
    assert "without loss scaling" not in table and "Loss scaling does not change this" in table
    assert _shown(table, "saturated") == ["0.0% (0)", "0.0% (0)"]
    # The docs' page on the tabs quotes the same share.
    using = " ".join((Path(__file__).parents[3] / "docs" / "using.md").read_text().split())
    assert f"at the defaults NVFP4 loses {lost['float32'] / total:.1%} of the gradient's" in using


def test_block_figure_draws_entries_in_their_blocks_units_on_the_element_formats_bands(nvfp4):
    figure = magnitude_histogram(nvfp4)
    layout = figure["layout"]
    assert [note["text"] for note in layout["annotations"]] == list(BLOCK_BANDS)
    assert "float4_e2m1fn" in layout["title"]["text"] and "blocks" in layout["title"]["text"]
    bars = figure["data"][0]
    saturates = next(
        shape
        for shape, note in zip(layout["shapes"], layout["annotations"], strict=True)
        if note["text"] == "saturates"
    )
    # No entry in the band past E2M1's max (at S = 2^10 the old figure drew all of them there).
    beyond = [
        count
        for x, count in zip(bars["x"][1:-1], bars["y"][1:-1], strict=True)
        if x > saturates["x0"]
    ]
    assert sum(beyond) == 0
    assert sum(bars["y"]) == sum(p.size for p in nvfp4.params.values())
