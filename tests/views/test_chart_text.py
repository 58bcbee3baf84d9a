"""A chart's text alternative states its data's key numbers, recomputed here with numpy; the dark
palette keeps every swapped colour readable (WCAG contrast computed here)."""

from __future__ import annotations

import numpy as np

from helpers import contrast, hex_rgb
from playground import StepConfig, run_report
from playground.sections.lab.charts import fixed_binade_span, magnitude_histogram
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


def test_the_magnitude_axis_is_the_same_for_every_dtype_and_scale():
    ranges = set()
    for dtype, scale in (("bfloat16", 1.0), ("float16", 2.0**15), ("float8", 1.0)):
        figure = magnitude_histogram(
            run_report(StepConfig(**SMALL, compute_dtype=dtype, loss_scale=scale))
        )
        ranges.add(tuple(figure["layout"]["xaxis"]["range"]))
    assert len(ranges) == 1
    (first, last), (low, high) = ranges.pop(), fixed_binade_span()
    # float32's smallest subnormal (2^-149) and largest value (under 2^128) are both inside.
    assert first < np.log2(np.finfo(np.float32).smallest_subnormal) - 1 <= low
    assert last > np.log2(np.finfo(np.float32).max) and high >= 127
