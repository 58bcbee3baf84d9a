import json

import numpy as np
import plotly.graph_objects as go
import pytest

from playground import StepConfig, run_report
from playground.core.settings.settings import LOSS_SCALE_MAX
from playground.sections.lab.charts import magnitude_histogram
from playground.sections.step.charts import (
    FIGURES,
    _loss_range,
    gradient_histograms,
    gradient_scatter,
    loss_figure,
)
from playground.views.plotly import MAX_POINTS

MAX_BYTES = 200_000  # per figure, as JSON


def all_figures(report):
    """Every figure the step event draws, in page order."""
    return [figure(report) for figure in FIGURES] + [magnitude_histogram(report)]


REPORT_CONFIG = StepConfig(n=300, d_in=70, d_out=30)  # the shared ``report`` fixture's


def _points(figure) -> int:
    return sum(len(trace.get("x", [])) for trace in figure["data"])


def test_every_figure_is_valid_plotly_json_with_titles(report):
    for figure in all_figures(report):
        json.dumps(figure, allow_nan=False)
        validated = go.Figure(figure)  # raises on any unknown or mistyped property
        assert validated.layout.title.text
        assert validated.layout.xaxis.title.text or validated.layout.yaxis.title.text


def test_histograms_count_every_finite_entry(report):
    figure = gradient_histograms(report)
    by_name = {trace["name"]: trace for trace in figure["data"]}
    for param in report.params.values():
        assert sum(by_name[f"float32 {param.name}"]["y"]) == param.size
        assert sum(by_name[f"mixed {param.name}"]["y"]) == param.size


def test_scatter_is_subsampled_and_has_the_identity_line(report):
    figure = gradient_scatter(report)
    kernel = next(t for t in figure["data"] if t["name"].startswith("kernel"))
    assert len(kernel["x"]) == MAX_POINTS < report.kernel.size
    # The points are real (float32, mixed) pairs of the report.
    kernel_grads = report.kernel
    pairs = set(
        zip(kernel_grads.float32_grads.ravel(), kernel_grads.mixed_grads.ravel(), strict=True)
    )
    assert all((x, y) in pairs for x, y in zip(kernel["x"], kernel["y"], strict=True))
    line = next(t for t in figure["data"] if t["name"] == "y = x")
    assert line["x"] == line["y"]


def test_figures_stay_small_at_the_largest_shape():
    big = run_report(StepConfig(n=4096, d_in=1024, d_out=1024))
    for figure in all_figures(big):
        # Two parameters of at most MAX_POINTS points each, plus a few hundred histogram bins.
        assert _points(figure) <= 2 * MAX_POINTS + 400
        assert len(json.dumps(figure, allow_nan=False)) < MAX_BYTES, figure["layout"]["title"]


def test_non_finite_gradients_are_reported_not_plotted():
    overflowed = run_report(
        StepConfig(n=16, d_in=4, d_out=2, loss_scale=LOSS_SCALE_MAX, compute_dtype="float16")
    )
    figure = gradient_histograms(overflowed)
    mixed = next(t for t in figure["data"] if t["name"].startswith("mixed kernel"))
    assert "8 non-finite not shown" in mixed["name"]
    assert sum(mixed["y"]) == 0
    for figure in all_figures(overflowed):
        json.dumps(figure, allow_nan=False)
        go.Figure(figure)
    assert np.isnan(overflowed.mixed_new_loss)


# --- the loss chart --------------------------------------------------------------------------


def _losses(report) -> list[float]:
    return [
        report.mixed_initial_loss,
        report.mixed_new_loss,
        report.float32_initial_loss,
        report.float32_new_loss,
    ]


def test_loss_axis_is_zoomed_to_the_losses_and_says_it_does_not_start_at_zero(report):
    figure = loss_figure(report)
    low, high = figure["layout"]["yaxis"]["range"]
    losses = _losses(report)
    assert 0 < low < min(losses) and max(losses) < high
    assert "does not start at 0" in figure["layout"]["yaxis"]["title"]["text"]
    # The mixed-vs-float32 gap after the step takes a visible share of the axis (at 0-based
    # bars it was 0.1% of the height); here at least 2%.
    gap = abs(report.mixed_new_loss - report.float32_new_loss)
    assert gap / (high - low) > 0.02, (gap, low, high)
    dots = {trace["name"]: trace["y"] for trace in figure["data"] if trace["type"] == "scatter"}
    assert dots == {
        "mixed (bfloat16)": [report.mixed_initial_loss, report.mixed_new_loss],
        "float32": [report.float32_initial_loss, report.float32_new_loss],
    }


def test_loss_difference_panel_draws_mixed_minus_float32_from_zero(report):
    figure = loss_figure(report)
    (bars,) = [trace for trace in figure["data"] if trace["type"] == "bar"]
    assert bars["yaxis"] == "y2" and bars["name"] == "mixed - float32"
    assert bars["y"] == [
        report.mixed_initial_loss - report.float32_initial_loss,
        report.mixed_new_loss - report.float32_new_loss,
    ]
    low, high = figure["layout"]["yaxis2"]["range"]
    assert low <= min(0, *bars["y"]) and max(0, *bars["y"]) <= high  # bars from 0 fit


def test_loss_axis_starts_at_zero_when_the_loss_falls_close_to_it():
    # From 2.0 to 0.1 the padded range would dip below 0; an MSE never does, so the axis
    # starts at 0 and its title no longer says otherwise.
    assert _loss_range([2.0, 0.1, 2.0, 0.1]) == ([0.0, pytest.approx(2.38)], "MSE loss")
    assert _loss_range([float("nan")] * 4) == (None, "MSE loss")


def test_non_finite_loss_gets_a_note_in_both_panels_not_a_crash():
    # float16 with S = 2^16: the scale itself overflows, the new mixed loss is NaN.
    overflowed = run_report(
        StepConfig(n=16, d_in=4, d_out=2, compute_dtype="float16", loss_scale=2.0**16)
    )
    assert np.isnan(overflowed.mixed_new_loss)
    figure = loss_figure(overflowed)
    json.dumps(figure, allow_nan=False)
    go.Figure(figure)
    notes = {note["text"]: note for note in figure["layout"]["annotations"]}
    assert set(notes) == {"mixed: NaN", "difference: NaN"}
    assert notes["mixed: NaN"]["yref"] == "y domain"
    assert notes["difference: NaN"]["yref"] == "y2 domain"
    mixed = next(t for t in figure["data"] if t["name"] == "mixed (float16)")
    assert mixed["y"] == [overflowed.mixed_initial_loss, None]
    low, high = figure["layout"]["yaxis"]["range"]
    finite = [v for v in _losses(overflowed) if np.isfinite(v)]
    assert 0 < low < min(finite) and max(finite) < high
