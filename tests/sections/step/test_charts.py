import json

import numpy as np
import plotly.graph_objects as go
import pytest

from playground import StepConfig, run_report
from playground.sections.lab.charts import magnitude_histogram
from playground.sections.step.charts import FIGURES, gradient_histograms, gradient_scatter
from playground.settings import LOSS_SCALE_MAX
from playground.views.plotly import MAX_POINTS


def all_figures(report):
    """Every figure the step event draws, in page order."""
    return [figure(report) for figure in FIGURES] + [magnitude_histogram(report)]


@pytest.fixture(scope="module")
def report():
    return run_report(StepConfig(n=300, d_in=70, d_out=30))


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
