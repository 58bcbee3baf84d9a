"""A chart's text alternative states its data's key numbers, recomputed here with numpy; the dark
palette keeps every swapped colour readable (WCAG contrast computed here)."""

from __future__ import annotations

import numpy as np

from helpers import contrast, hex_rgb
from playground import StepConfig, run_report
from playground.sections.lab.charts import dtype_binade_span, magnitude_histogram
from playground.sections.step.charts import gradient_scatter
from playground.views.chart_text import describe, with_description
from playground.views.plotly import (
    BAND_TEXT_COLORS,
    CHART_BACKGROUND,
    DARK_BACKGROUND,
    DARK_PALETTE,
    TEXT_COLOR,
    WARNING_TEXT_COLOR,
)

SMALL = {"n": 32, "d_in": 8, "d_out": 4}


REPORT_CONFIG = StepConfig(**SMALL, compute_dtype="float16")  # the shared ``report`` fixture's


def test_a_histograms_description_gives_its_total_and_tallest_bar(report):
    figure = magnitude_histogram(report)
    bars = figure["data"][0]
    heights = np.array(bars["y"])
    text = describe(figure)
    assert text.startswith("Chart: Gradient magnitudes against float16")
    assert f"{int(heights.sum()):,}" in text and f"the tallest {int(heights.max()):,}" in text
    size = sum(p.size for p in report.params.values())
    assert heights.sum() == size  # every entry has a bar: zeros, a binade or inf/NaN


def test_a_scatters_description_gives_its_points_and_ranges(report):
    figure = gradient_scatter(report)
    kernel = report.params["kernel"].mixed_grads
    text = describe(figure)
    assert f"{kernel.size:,} points" in text
    assert f"y from {kernel.min():.4g} to {kernel.max():.4g}" in text
    assert "y = x:" not in text  # the guide is no data


def test_a_category_charts_description_names_each_point():
    # The route's pictures: operations along x and runs along y; a loss on a run's row.
    operations = {
        "type": "scatter",
        "mode": "markers",
        "name": "float16: inf or NaN",
        "x": ["norms.0", "mse"],
        "y": ["exercise", "exercise"],
    }
    loss = operations | {"name": "float32 loss", "x": [13.40211], "y": ["float32"]}
    text = describe({"layout": {"title": {"text": "Operations"}}, "data": [operations, loss]})
    assert "float16: inf or NaN: norms.0 (exercise), mse (exercise)." in text
    assert "float32 loss: 13.4 (float32)." in text
    assert "no finite values" not in text


def test_the_description_rides_in_the_layout_meta_without_changing_the_figure(report):
    figure = magnitude_histogram(report)
    described = with_description(figure)
    assert described["layout"]["meta"]["description"] == describe(figure)
    assert described["data"] is figure["data"] and "meta" not in figure["layout"]


def test_every_text_colour_reads_on_its_theme_at_4_5_to_1():
    light = [TEXT_COLOR, WARNING_TEXT_COLOR, *BAND_TEXT_COLORS.values()]
    for color in light:
        assert contrast(hex_rgb(color), hex_rgb(CHART_BACKGROUND)) >= 4.5, color
        dark = DARK_PALETTE.get(color, color)
        assert dark != color, f"{color} has no dark counterpart"
        assert contrast(hex_rgb(dark), hex_rgb(DARK_BACKGROUND)) >= 4.5, (color, dark)


def test_the_magnitude_axis_spans_its_dtypes_ranges_and_the_data():
    for dtype, scale in (("bfloat16", 1.0), ("float16", 2.0**15), ("float8", 1.0)):
        report = run_report(StepConfig(**SMALL, compute_dtype=dtype, loss_scale=scale))
        layout = magnitude_histogram(report)["layout"]
        first, last = layout["xaxis"]["range"]
        normal = next(
            s
            for s, n in zip(layout["shapes"], layout["annotations"], strict=True)
            if n["text"] == "normal"
        )
        fmt = "float8_e5m2" if dtype == "float8" else dtype
        low, high = dtype_binade_span(fmt)
        assert first < low and last > high
        values = np.concatenate([p.scaled_grads.ravel() for p in report.params.values()])
        logs = np.log2(np.abs(values[np.isfinite(values) & (values != 0)]))
        assert first < logs.min() and logs.max() < last
        # float16's normal range fills over a third of the chart (on one axis for every
        # dtype, from -167 to 145, it filled 13%).
        if dtype == "float16":
            assert (normal["x1"] - normal["x0"]) / (last - first) > 0.35
