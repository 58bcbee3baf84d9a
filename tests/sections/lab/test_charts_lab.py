"""The magnitude chart's band labels and the names of the two views of the gradients."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest

from playground import StepConfig, run_report
from playground.core.formats.dtypes import DTYPES
from playground.core.step.report import LOG2_HIGH, LOG2_LOW, ActivationReport
from playground.sections.lab.charts import (
    BLOCK_BANDS,
    SCALED_LABEL,
    UNSCALED_LABEL,
    activation_histogram,
    binade_axis,
    magnitude_histogram,
)
from playground.sections.step.summary import summarize

FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")
# Every low-precision format of the registry, with its band widths: bfloat16's flush and
# subnormal bands are 1 and 8 of about 270 binades; float8 E5M2 (the float8 recipe's gradients)
# has a 3-binade subnormal band.
FORMATS = tuple(name for name in DTYPES if name != "float32")
# log2 of the data's smallest and largest nonzero magnitude: inside the normal range, far below
# it (a wide flush band), far above it (a wide overflow band), and both.
DATA_RANGES = ((-3.0, 3.0), (-60.0, 2.0), (-2.0, 60.0), (-150.0, 140.0))
PLOT_WIDTHS = (260, 330, 500, 800, 1100, 1400)  # px: a phone's plot area to a desktop's
SMALL = {"n": 32, "d_in": 8, "d_out": 4}


def _text_width(text: str, size: float) -> float:
    """Width in px of ``text`` at ``size`` px, measured in DejaVu Sans (Chromium's sans-serif
    here, and wider than Open Sans or Arial); 0.62 em per character without the font."""
    try:
        from PIL import ImageFont

        return ImageFont.truetype(str(FONT), size).getlength(text)
    except (ImportError, OSError):
        return 0.62 * size * len(text)


def _label_boxes(layout: dict, plot_width: float) -> list[tuple[str, float, float, float, float]]:
    """(text, left, right, bottom, top) of each band label in px: x from the plot's left edge,
    y upwards from the plot's top edge, as Plotly places a bottom-anchored note at y = 1."""
    first, last = layout["xaxis"]["range"]
    boxes = []
    for note in layout["annotations"]:
        assert note["yref"] == "paper" and note["y"] == 1 and note["yanchor"] == "bottom"
        size = note["font"]["size"]
        centre = (note["x"] - first) / (last - first) * plot_width
        half = _text_width(note["text"], size) / 2
        bottom = note.get("yshift", 0)
        boxes.append((note["text"], centre - half, centre + half, bottom, bottom + 1.3 * size))
    return boxes


@pytest.mark.parametrize(("dtype", "data"), itertools.product(FORMATS, DATA_RANGES))
def test_band_labels_never_overlap_each_other_or_the_title(dtype, data):
    layout = binade_axis(dtype, *data).layout("Gradient magnitudes", "log2 |gradient entry|")
    assert [note["text"].split(",")[0] for note in layout["annotations"]] == [
        "flushed to 0",
        "subnormal",
        "normal",
        "overflow",
    ]
    top_margin = layout["margin"]["t"]
    title_bottom = top_margin / 2 + layout["title"]["font"]["size"] * 0.65  # centred in margin
    for width in PLOT_WIDTHS:
        boxes = _label_boxes(layout, width)
        for one, other in itertools.combinations(boxes, 2):
            apart = one[2] + 1 <= other[1] or other[2] + 1 <= one[1]
            stacked = one[4] <= other[3] or other[4] <= one[3]
            assert apart or stacked, (dtype, data, width, one, other)
        highest = max(box[4] for box in boxes)
        assert top_margin - highest >= title_bottom, (dtype, data, width, highest)


def test_narrow_neighbouring_bands_stack_and_wide_ones_share_the_first_row():
    layout = binade_axis("bfloat16", -3.0, 3.0).layout("t", "x")
    rows = {note["text"]: note.get("yshift", 0) for note in layout["annotations"]}
    # bfloat16's flush band (1 binade) sits right beside its subnormal band (8 binades).
    assert rows["flushed to 0"] != rows["subnormal, flushed here"]
    assert rows["normal"] == 0


def test_chart_legend_and_table_name_the_gradients_alike():
    from playground.sections.lab.tab import magnitude_table

    report = run_report(StepConfig(**SMALL, compute_dtype="float16"))
    legend = [trace["name"] for trace in magnitude_histogram(report)["data"]]
    assert legend == [SCALED_LABEL, UNSCALED_LABEL]
    table = magnitude_table(report)
    header = next(line for line in table.splitlines() if line.startswith("| "))
    columns = [cell.strip() for cell in header.split("|")[2:-1]]
    assert columns == ["without loss scaling (float32 gradient cast to float16)", SCALED_LABEL]
    assert "before scaling" not in table and "after scaling" not in table
    # The JSON summary keeps its keys: scripts read them.
    assert {"before scaling", "after scaling"} <= set(summarize(report)["magnitudes"])


def test_activation_chart_names_its_gradients_as_the_magnitude_chart_does():
    report = run_report(StepConfig(**SMALL, compute_dtype="float16"))
    counts = np.zeros(LOG2_HIGH - LOG2_LOW, np.int64)
    counts[-5 - LOG2_LOW] = 8  # one made-up hidden layer: no MLP to compile
    layer = ActivationReport(layer=0, zero_count=2, nonfinite_count=0, size=10, log2_counts=counts)
    figure = activation_histogram(dataclasses.replace(report, activations=(layer,)))
    assert figure["data"][0]["y"][0] == 2 and sum(figure["data"][0]["y"]) == 10
    assert figure["layout"]["xaxis"]["title"]["text"].endswith(SCALED_LABEL)
    assert len(figure["layout"]["annotations"]) == 4  # the same bands, labelled the same way


def test_a_block_recipe_s_activation_chart_draws_block_units_on_the_element_format_s_bands():
    report = run_report(StepConfig(**SMALL, compute_dtype="nvfp4"))
    counts = np.zeros(LOG2_HIGH - LOG2_LOW, np.int64)
    counts[1 - LOG2_LOW] = 5  # units in [2, 4): normal E2M1
    counts[0] = 3  # units 0: a block whose scale flushed to zero
    layer = ActivationReport(layer=0, zero_count=2, nonfinite_count=0, size=10, log2_counts=counts)
    figure = activation_histogram(dataclasses.replace(report, activations=(layer,)))
    layout = figure["layout"]
    assert [note["text"] for note in layout["annotations"]] == list(BLOCK_BANDS)
    assert "float4_e2m1fn" in layout["title"]["text"] and "blocks" in layout["title"]["text"]
    assert "blocks of 16" in layout["xaxis"]["title"]["text"]
    trace = figure["data"][0]
    # The flushed block's entries are drawn with the zeros (stored as 0), not at 2^-150,
    # so the axis keeps E2M1's span (a few binades, not 150).
    assert trace["y"][0] == 2 + 3 and sum(trace["y"]) == 10
    assert trace["name"] == "layer 1: 50.0% zero"  # the legend counts what the bar draws
    assert trace["x"][trace["y"][1:-1].index(5) + 1] == 1.5
    assert max(trace["x"]) - min(trace["x"]) < 40


def test_activation_chart_of_a_linear_model_is_a_short_note_without_axes():
    figure = activation_histogram(run_report(StepConfig(**SMALL, compute_dtype="float16")))
    assert figure["data"] == []
    assert "choose mlp" in figure["layout"]["title"]["text"]
    assert figure["layout"]["height"] <= 150
    assert not figure["layout"]["xaxis"]["visible"] and not figure["layout"]["yaxis"]["visible"]
