"""Plotly figures of a StepReport's step section, one function per figure (see views.plotly)."""

from __future__ import annotations

import numpy as np

from playground.core.report import StepReport
from playground.views.plotly import (
    FLOAT32_COLOR,
    LEGEND_BELOW,
    MIXED_COLOR,
    TEXT_COLOR,
    Figure,
    axis,
    bar_trace,
    base_layout,
    bin_edges,
    finite_values,
    log10_histogram,
    not_shown,
    param_color,
    subsample,
)


def loss_figure(report: StepReport) -> Figure:
    """Grouped bars: the unscaled loss before and after the step, mixed vs float32."""
    dtype = report.config.compute_dtype
    traces = []
    for name, color, before, after in (
        (f"mixed ({dtype})", MIXED_COLOR, report.mixed_initial_loss, report.mixed_new_loss),
        ("float32", FLOAT32_COLOR, report.float32_initial_loss, report.float32_new_loss),
    ):
        values = [before, after]
        traces.append(
            {
                "type": "bar",
                "x": ["before the step", "after the step"],
                "y": [v if np.isfinite(v) else None for v in values],
                "text": [f"{v:.6g}" for v in values],
                "textposition": "auto",
                "name": name,
                "marker": {"color": color},
                "hovertemplate": "%{x}: %{text}<extra>" + name + "</extra>",
            }
        )
    return {"data": traces, "layout": base_layout("Loss before and after", "", "MSE loss")}


def shown_params(report: StepReport) -> list:
    """The parameters a per-parameter chart shows: both of the linear model's; for a deeper
    model, the first and the last layer's weights (where the gradients differ most), so the
    chart keeps two readable rows. The summary lists every parameter."""
    params = list(report.params.values())
    if len(params) <= 2:
        return params
    weights = [p for p in params if p.name.endswith("kernel")]
    return [weights[0], weights[-1]]


def gradient_histograms(report: StepReport) -> Figure:
    """Gradient entries binned: float32 as bars, mixed (unscaled) as an outline; kernel first."""
    data: list[Figure] = []
    layout = base_layout("Gradient histograms: mixed vs float32", "", "")
    layout.update(barmode="overlay", grid={"rows": 2, "columns": 1, "pattern": "independent"})
    for row, param in enumerate(shown_params(report), start=1):
        suffix = "" if row == 1 else str(row)
        edges = bin_edges(param.mixed_grads, param.float32_grads)
        axes = {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
        base = param.float32_grads
        data.append(
            bar_trace(base, edges, f"float32 {param.name}{not_shown(base)}", FLOAT32_COLOR, **axes)
        )
        # The mixed path as a step outline over the float32 bars, so both stay visible.
        counts, _ = np.histogram(finite_values(param.mixed_grads), bins=edges)
        name = f"mixed {param.name}{not_shown(param.mixed_grads)}"
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "line": {"shape": "hvh", "color": MIXED_COLOR, "width": 2},
                "x": ((edges[:-1] + edges[1:]) / 2).tolist(),
                "y": counts.tolist(),
                "name": name,
                "hovertemplate": "%{y} entries near %{x:.3g}<extra>" + name + "</extra>",
                **axes,
            }
        )
        layout[f"xaxis{suffix}"] = axis(f"{param.name} gradient entry")
        # Whole ticks when counts are small: no "0.5 entries" on the bias histogram.
        small = {"dtick": 1} if max(data[-1]["y"] + data[-2]["y"]) < 10 else {}
        layout[f"yaxis{suffix}"] = axis("entries", rangemode="tozero", **small)
    layout["height"] = 600
    layout["legend"] = LEGEND_BELOW
    layout["margin"]["b"] = 110
    return {"data": data, "layout": layout}


def gradient_scatter(report: StepReport) -> Figure:
    """Each gradient entry as (float32, mixed); on the y = x line the two paths agree exactly."""
    data: list[Figure] = []
    low, high = np.inf, -np.inf
    for param in shown_params(report):
        base, mixed = param.float32_grads.ravel(), param.mixed_grads.ravel()
        keep = np.isfinite(base) & np.isfinite(mixed)
        base, mixed = base[keep], mixed[keep]
        if base.size == 0:
            continue
        picked = subsample(base.size)
        low = min(low, float(base.min()), float(mixed.min()))
        high = max(high, float(base.max()), float(mixed.max()))
        shown = f"{picked.size:,} of {param.size:,}"
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": base[picked].tolist(),
                "y": mixed[picked].tolist(),
                "name": f"{param.name} ({shown} entries)",
                "marker": {"color": param_color(param.name), "size": 5, "opacity": 0.7},
                "hovertemplate": "float32 %{x:.6g}<br>mixed %{y:.6g}<extra>"
                + param.name
                + "</extra>",
            }
        )
    if np.isfinite(low):
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [low, high],
                "y": [low, high],
                "name": "y = x",
                "line": {"color": TEXT_COLOR, "dash": "dash", "width": 1},
                "hoverinfo": "skip",
            }
        )
    layout = base_layout("Mixed vs float32 gradient entries", "float32 gradient", "mixed gradient")
    return {"data": data, "layout": layout}


def relative_error_histogram(report: StepReport) -> Figure:
    """Distribution of |mixed - float32| / |float32| per entry, on a log10 axis."""
    arrays = {param.name: param.rel_error for param in shown_params(report)}
    return log10_histogram(
        "Element-wise relative gradient error vs float32",
        "log10 relative error",
        arrays,
    )


def update_size_histogram(report: StepReport) -> Figure:
    """Distribution of |update| / RMS(parameter tensor) of the mixed step, on a log10 axis."""
    arrays = {param.name: param.update_ratio for param in shown_params(report)}
    return log10_histogram(
        "Update size relative to the parameter (mixed step)",
        "log10 |update| / RMS of its parameter tensor",
        arrays,
    )


FIGURES = (
    loss_figure,
    gradient_histograms,
    gradient_scatter,
    relative_error_histogram,
    update_size_histogram,
)
