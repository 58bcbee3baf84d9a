"""Plotly figures of a StepReport's step section, one function per figure (see views.plotly)."""

from __future__ import annotations

import re

import numpy as np

from playground.core.step.report import StepReport
from playground.views.plotly import (
    COUNT_FORMAT,
    ERROR_COLOR,
    FLOAT32_COLOR,
    LEGEND_BELOW,
    MIXED_COLOR,
    TEXT_COLOR,
    WARNING_TEXT_COLOR,
    Figure,
    axis,
    bar_trace,
    base_layout,
    bin_edges,
    empty_note,
    finite_values,
    log10_histogram,
    not_shown,
    param_color,
    subsample,
)

LOSS_TIMES = ("before<br>the step", "after<br>the step")
DIFFERENCE_TIMES = ("before", "after")  # shorter: the narrow panel keeps them level on a phone
DOT_OFFSET = 0.08  # the mixed dots sit left of each time, the float32 dots right of it


def _shown_loss(value: float) -> str:
    return f"{value:.6g}" if np.isfinite(value) else str(value).replace("nan", "NaN")


def _short(value: float) -> str:
    """Two significant digits, signed, exponent without padding: +0.0024, -4.7e-9."""
    return re.sub(r"e([+-])0*(\d)", r"e\1\2", f"{value:+.2g}")


def _loss_range(values: list[float]) -> tuple[list[float] | None, str]:
    """The loss panel's y range and axis title: zoomed to the finite losses, so a gap of 0.1%
    between the paths shows, and titled as not starting at 0 whenever it does not."""
    finite = [v for v in values if np.isfinite(v)]
    if not finite:
        return None, "MSE loss"
    low, high = min(finite), max(finite)
    pad = max(0.2 * (high - low), 1e-6 * max(abs(low), abs(high)), 1e-30)
    bottom = max(low - pad, 0.0)  # an MSE is never negative
    title = "MSE loss" if bottom == 0 else "MSE loss (zoomed: axis does not start at 0)"
    return [bottom, high + pad], title


def _non_finite_note(x: float, xref: str, yref: str, text: str) -> dict:
    """A red note at the top of a panel, where a non-finite value would have been drawn."""
    return {
        "x": x,
        "y": 1,
        "xref": xref,
        "yref": f"{yref} domain",
        "yanchor": "top",
        "text": text,
        "showarrow": False,
        "font": {"color": WARNING_TEXT_COLOR, "size": 12},
    }


def loss_figure(report: StepReport) -> Figure:
    """The unscaled loss before and after the step, in two panels, so a 0.002 gap is visible.

    Left: the four losses as dots (mixed left of float32 at each time) on an axis zoomed to
    their values, titled as not starting at 0; the values are in the hover and the headline
    table, since labels beside dots this close collide on a phone. Right: mixed - float32 as
    bars from 0. A non-finite loss gets no dot but a red note naming it (NaN, inf), in both.
    """
    dtype = report.config.compute_dtype
    paths = (
        (f"mixed ({dtype})", MIXED_COLOR, -DOT_OFFSET,
         (report.mixed_initial_loss, report.mixed_new_loss)),
        ("float32", FLOAT32_COLOR, DOT_OFFSET,
         (report.float32_initial_loss, report.float32_new_loss)),
    )  # fmt: skip
    data, notes = [], []
    for name, color, offset, values in paths:
        x = [index + offset for index in range(len(LOSS_TIMES))]
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "x": x,
                "y": [v if np.isfinite(v) else None for v in values],
                "customdata": list(LOSS_TIMES),
                "name": name,
                "line": {"color": color, "width": 2},
                "marker": {"color": color, "size": 11},
                "hovertemplate": "%{customdata}: %{y:.7g}<extra>" + name + "</extra>",
            }
        )
        notes += [
            _non_finite_note(at, "x", "y", f"{name.split()[0]}: {_shown_loss(v)}")
            for at, v in zip(x, values, strict=True)
            if not np.isfinite(v)
        ]
    differences = [
        report.mixed_initial_loss - report.float32_initial_loss,
        report.mixed_new_loss - report.float32_new_loss,
    ]
    data.append(
        {
            "type": "bar",
            "x": list(DIFFERENCE_TIMES),
            "y": [d if np.isfinite(d) else None for d in differences],
            "text": [_short(d) if np.isfinite(d) else "" for d in differences],
            "textposition": "outside",
            "constraintext": "none",  # full size even above a phone's narrow bar
            "textfont": {"color": TEXT_COLOR, "size": 12},
            "cliponaxis": False,
            "name": "mixed - float32",
            "marker": {"color": ERROR_COLOR},
            "xaxis": "x2",
            "yaxis": "y2",
            "hovertemplate": "%{x} the step: %{y:+.4g}<extra>mixed - float32</extra>",
        }
    )
    notes += [
        _non_finite_note(when, "x2", "y2", f"difference: {_shown_loss(d)}")
        for when, d in zip(DIFFERENCE_TIMES, differences, strict=True)
        if not np.isfinite(d)
    ]
    y_range, y_title = _loss_range([v for *_, values in paths for v in values])
    layout = base_layout("Loss before and after the step", "", y_title, annotations=notes)
    layout["xaxis"].update(
        domain=[0, 0.56],
        tickvals=list(range(len(LOSS_TIMES))),
        ticktext=list(LOSS_TIMES),
        range=[-0.7, len(LOSS_TIMES) - 0.3],
        showgrid=False,
        zeroline=False,
    )
    if y_range is not None:
        layout["yaxis"]["range"] = y_range
    layout["xaxis2"] = axis("", domain=[0.7, 1], anchor="y2")
    layout["yaxis2"] = axis(
        "mixed - float32", anchor="x2", zerolinecolor=TEXT_COLOR, zerolinewidth=1
    )
    finite = [d for d in differences if np.isfinite(d)]
    if finite:  # from 0, with space beyond each bar for its label
        low, high = min(0.0, *finite), max(0.0, *finite)
        room = 0.25 * (high - low)
        layout["yaxis2"]["range"] = (
            [low - room if low < 0 else 0.0, high + room if high > 0 else 0.0]
            if room
            else [-1.0, 1.0]  # the paths agree exactly: bars of height 0 on a plain axis
        )
    layout["legend"] = LEGEND_BELOW
    return {"data": data, "layout": layout}


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
        layout[f"yaxis{suffix}"] = axis(
            "entries", rangemode="tozero", tickformat=COUNT_FORMAT, **small
        )
    layout["height"] = 600
    layout["legend"] = LEGEND_BELOW
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
    layout = base_layout("Mixed vs float32 gradient entries", "float32 gradient", "mixed gradient")
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
    else:  # say why it is empty, on axes spanning float32's gradients (or -1..1)
        params = shown_params(report)
        nonfinite, size = sum(p.nonfinite_count for p in params), sum(p.size for p in params)
        layout["annotations"] = [
            empty_note(
                f"no finite points: {nonfinite:,} of {size:,} mixed gradient entries<br>"
                "are inf or NaN (see the note above the chart)"
            )
        ]
        reach = max(float(np.abs(finite_values(p.float32_grads)).max(initial=0)) for p in params)
        layout["xaxis"]["range"] = layout["yaxis"]["range"] = [-(reach or 1.0), reach or 1.0]
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
