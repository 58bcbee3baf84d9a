"""Plotly figures of a StepReport, one function per figure.

Rule: a figure is a plain Plotly JSON dict ({"data": [...], "layout": {...}}) built from the
report's numpy arrays after binning or subsampling, so it carries at most a few thousand numbers
whatever the shapes. Dicts cost microseconds to build, where ``plotly.graph_objects`` validation
would cost milliseconds per figure on every run; tests validate every dict with
``plotly.graph_objects.Figure``. Colours and fonts are chosen to read on light and dark pages.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from playground.dynamics import DynamicsReport
from playground.precision import log2_magnitude_bands
from playground.report import StepReport
from playground.sweep import SweepReport

Figure = dict[str, Any]

MIXED_COLOR = "#f28e2b"  # orange: the low-precision path
FLOAT32_COLOR = "#4e79a7"  # blue: the float32 twin
PARAM_COLORS = {"kernel": "#59a14f", "bias": "#b07aa1"}
ERROR_COLOR = "#9c755f"  # brown: relative error curves
OVERFLOW_COLOR = "#e15759"  # red: non-finite values and the pure low-precision run
TEXT_COLOR = "#777777"  # mid grey: about 4.5:1 contrast on white and on Gradio's dark page
GRID_COLOR = "rgba(140, 140, 140, 0.25)"
BINS = 60
MAX_POINTS = 2000  # per scatter trace


def _axis(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "gridcolor": GRID_COLOR,
        "zerolinecolor": GRID_COLOR,
        "automargin": True,
        **extra,
    }


LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0}


def _layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}},
        "xaxis": _axis(x_title),
        "yaxis": _axis(y_title),
        "font": {"color": TEXT_COLOR, "size": 12},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        "margin": {"l": 10, "r": 10, "t": 70, "b": 10},
        "autosize": True,
        "hovermode": "closest",
        **extra,
    }


def _finite(values: np.ndarray) -> np.ndarray:
    flat = values.ravel()
    return flat[np.isfinite(flat)]


def _edges(*arrays: np.ndarray) -> np.ndarray:
    """Equal-width bin edges spanning the finite values of all arrays.

    BINS bins, or about 2 * sqrt(entries) for small arrays (16 bias entries get 8 bins, not 60).
    """
    finite = np.concatenate([_finite(a) for a in arrays]) if arrays else np.zeros(0)
    bins = int(min(BINS, max(4, 2 * np.sqrt(max(a.size for a in arrays) if arrays else 0))))
    if finite.size == 0:
        return np.linspace(-1.0, 1.0, bins + 1)
    low, high = float(finite.min()), float(finite.max())
    if low == high:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, bins + 1)


def _bars(
    values: np.ndarray,
    edges: np.ndarray,
    name: str,
    color: str,
    hover: str = "%{y} entries near %{x:.3g}",
    **extra: Any,
) -> Figure:
    counts, _ = np.histogram(_finite(values), bins=edges)
    centers = (edges[:-1] + edges[1:]) / 2
    return {
        "type": "bar",
        "x": centers.tolist(),
        "y": counts.tolist(),
        "width": float(edges[1] - edges[0]),
        "name": name,
        "marker": {"color": color},
        "opacity": 0.6,
        "hovertemplate": hover + "<extra>" + name + "</extra>",
        **extra,
    }


def _not_shown(values: np.ndarray) -> str:
    hidden = int(values.size - np.isfinite(values).sum())
    return f" ({hidden:,} non-finite not shown)" if hidden else ""


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
    return {"data": traces, "layout": _layout("Loss before and after", "", "MSE loss")}


def gradient_histograms(report: StepReport) -> Figure:
    """Gradient entries binned: float32 as bars, mixed (unscaled) as an outline; kernel first."""
    data: list[Figure] = []
    layout = _layout("Gradient histograms: mixed vs float32", "", "")
    layout.update(barmode="overlay", grid={"rows": 2, "columns": 1, "pattern": "independent"})
    for row, param in enumerate(report.params.values(), start=1):
        suffix = "" if row == 1 else str(row)
        edges = _edges(param.mixed_grads, param.float32_grads)
        axes = {"xaxis": f"x{suffix}", "yaxis": f"y{suffix}"}
        base = param.float32_grads
        data.append(
            _bars(base, edges, f"float32 {param.name}{_not_shown(base)}", FLOAT32_COLOR, **axes)
        )
        # The mixed path as a step outline over the float32 bars, so both stay visible.
        counts, _ = np.histogram(_finite(param.mixed_grads), bins=edges)
        name = f"mixed {param.name}{_not_shown(param.mixed_grads)}"
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
        layout[f"xaxis{suffix}"] = _axis(f"{param.name} gradient entry")
        # Whole ticks when counts are small: no "0.5 entries" on the bias histogram.
        small = {"dtick": 1} if max(data[-1]["y"] + data[-2]["y"]) < 10 else {}
        layout[f"yaxis{suffix}"] = _axis("entries", rangemode="tozero", **small)
    layout["height"] = 600
    layout["legend"] = LEGEND_BELOW
    layout["margin"]["b"] = 110
    return {"data": data, "layout": layout}


def _subsample(count: int) -> np.ndarray:
    """Evenly spaced indices, at most MAX_POINTS of them."""
    return np.unique(np.linspace(0, count - 1, min(count, MAX_POINTS)).astype(np.int64))


def gradient_scatter(report: StepReport) -> Figure:
    """Each gradient entry as (float32, mixed); on the y = x line the two paths agree exactly."""
    data: list[Figure] = []
    low, high = np.inf, -np.inf
    for param in report.params.values():
        base, mixed = param.float32_grads.ravel(), param.mixed_grads.ravel()
        keep = np.isfinite(base) & np.isfinite(mixed)
        base, mixed = base[keep], mixed[keep]
        if base.size == 0:
            continue
        picked = _subsample(base.size)
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
                "marker": {"color": PARAM_COLORS[param.name], "size": 5, "opacity": 0.7},
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
    layout = _layout("Mixed vs float32 gradient entries", "float32 gradient", "mixed gradient")
    return {"data": data, "layout": layout}


def _log10_histogram(title: str, x_title: str, arrays: dict[str, np.ndarray]) -> Figure:
    """Histogram of log10 of positive finite values; zeros and undefined entries are counted."""
    logs = {}
    notes = []
    for name, values in arrays.items():
        flat = values.ravel()
        positive = flat[np.isfinite(flat) & (flat > 0)]
        logs[name] = np.log10(positive)
        zero, undefined = int(np.sum(flat == 0)), int(np.sum(~np.isfinite(flat)))
        if zero or undefined:
            notes.append(f"{name}: {zero:,} exactly 0, {undefined:,} undefined")
    edges = _edges(*logs.values())
    hover = "%{y} entries near 10^%{x:.2f}"
    data = [_bars(values, edges, name, PARAM_COLORS[name], hover) for name, values in logs.items()]
    full_title = title + ("<br><sup>" + "; ".join(notes) + "</sup>" if notes else "")
    return {"data": data, "layout": _layout(full_title, x_title, "entries", barmode="overlay")}


def relative_error_histogram(report: StepReport) -> Figure:
    """Distribution of |mixed - float32| / |float32| per entry, on a log10 axis."""
    arrays = {name: param.rel_error for name, param in report.params.items()}
    return _log10_histogram(
        "Element-wise relative gradient error vs float32",
        "log10 relative error",
        arrays,
    )


def update_size_histogram(report: StepReport) -> Figure:
    """Distribution of |lr * gradient| / |parameter| of the mixed step, on a log10 axis."""
    arrays = {name: param.update_ratio for name, param in report.params.items()}
    return _log10_histogram(
        "Update size relative to the parameter (mixed step)",
        "log10 |lr x gradient| / |parameter|",
        arrays,
    )


BAND_COLORS = {
    "flushed to 0": "rgba(225, 87, 89, 0.16)",
    "subnormal": "rgba(242, 142, 43, 0.16)",
    "normal": "rgba(89, 161, 79, 0.10)",
    "overflow": "rgba(225, 87, 89, 0.16)",
}


def _band(x0: float, x1: float, label: str, y: float = 1.0) -> tuple[dict, dict]:
    """A shaded vertical band over the whole plot height, labelled just above the plot (at y)."""
    shape = {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": x0,
        "x1": x1,
        "y0": 0,
        "y1": 1,
        "fillcolor": BAND_COLORS.get(label, "rgba(140, 140, 140, 0.12)"),
        "line": {"width": 0},
        "layer": "below",
    }
    note = {
        "x": (x0 + x1) / 2,
        "y": y,
        "xref": "x",
        "yref": "paper",
        "yanchor": "bottom",
        "text": label,
        "showarrow": False,
        "font": {"size": 11},
    }
    return shape, note


def magnitude_histogram(report: StepReport) -> Figure:
    """log2 |gradient| per binade, scaled (backward pass) and unscaled, over the dtype's ranges.

    Exact zeros and non-finite entries get bars of their own left and right of the axis; the
    shaded bands are the compute dtype's flush-to-zero, subnormal, normal and overflow ranges,
    from ``jnp.finfo``.
    """
    dtype = report.config.compute_dtype
    bands = log2_magnitude_bands(dtype)
    series = {
        f"scaled, as in the {dtype} backward pass": np.concatenate(
            [p.scaled_grads.ravel() for p in report.params.values()]
        ),
        "after unscaling (float32)": np.concatenate(
            [p.mixed_grads.ravel() for p in report.params.values()]
        ),
    }
    logs = {}
    for name, values in series.items():
        magnitudes = np.abs(values[np.isfinite(values) & (values != 0)])
        logs[name] = np.log2(magnitudes.astype(np.float64))
    present = np.concatenate(list(logs.values()))
    low = math.floor(min(bands["smallest_subnormal"], present.min(initial=np.inf))) - 1
    high = math.ceil(max(bands["max"], present.max(initial=-np.inf))) + 1
    edges = np.arange(low, high + 1, dtype=np.float64)
    gap = max(3, round((high - low) * 0.04))  # room for the "0" and "inf/NaN" bars' ticks
    zero_x, nonfinite_x = low - gap, high + gap
    data = []
    for index, (name, values) in enumerate(series.items()):
        counts, _ = np.histogram(logs[name], bins=edges)
        zeros, nonfinite = int(np.sum(values == 0)), int(np.sum(~np.isfinite(values)))
        trace = {
            "x": [zero_x, *((edges[:-1] + 0.5).tolist()), nonfinite_x],
            "y": [zeros, *counts.tolist(), nonfinite],
            "name": name,
            "hovertemplate": "%{y} entries at 2^%{x:.0f}<extra>" + name + "</extra>",
        }
        if index == 0:  # the scaled gradients as bars ...
            trace.update(type="bar", width=1.0, marker={"color": MIXED_COLOR}, opacity=0.7)
        else:  # ... and the unscaled ones as an outline, so both stay visible where they overlap
            trace.update(
                type="scatter",
                mode="lines",
                line={"shape": "hvh", "color": FLOAT32_COLOR, "width": 2},
            )
        data.append(trace)
    pieces = [  # the two narrow bands' labels are staggered so they never overlap
        _band(low, bands["smallest_subnormal"], "flushed to 0", y=1.07),
        _band(bands["smallest_subnormal"], bands["smallest_normal"], "subnormal"),
        _band(bands["smallest_normal"], bands["max"], "normal"),
        _band(bands["max"], high, "overflow"),
    ]
    step = 16 if high - low > 80 else 4
    ticks = list(range(int(math.ceil(low / step) * step), high + 1, step))
    layout = _layout(
        f"Gradient magnitudes against {dtype}'s ranges",
        "log2 |gradient entry|",
        "entries (log scale)",
        barmode="overlay",
        shapes=[shape for shape, _ in pieces],
        annotations=[note for _, note in pieces],
    )
    layout["xaxis"].update(
        tickvals=[zero_x, *ticks, nonfinite_x],
        ticktext=["zeros", *[str(t) for t in ticks], "inf/NaN"],
        range=[zero_x - gap / 2, nonfinite_x + gap / 2],
    )
    layout["yaxis"].update(type="log", dtick=1)  # a tick per power of ten, no minor labels
    layout["legend"] = LEGEND_BELOW
    layout["margin"].update(t=110, b=90)
    return {"data": data, "layout": layout}


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of each run of True in ``mask``."""
    runs, start = [], None
    for index, flag in enumerate([*mask.tolist(), False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index - 1))
            start = None
    return runs


def sweep_figure(sweep: SweepReport) -> Figure:
    """Error, underflow, overflow and new loss against log2 S; safe window and current S marked."""
    x = sweep.exponents.tolist()
    dtype = sweep.config.compute_dtype

    def curve(values, name, color, axis, scale=1.0):
        finite = [float(v) * scale if np.isfinite(v) else None for v in values]
        return {
            "type": "scatter",
            "mode": "lines+markers",
            "x": x,
            "y": finite,
            "name": name,
            "line": {"color": color},
            "marker": {"size": 4},
            "xaxis": "x",
            "yaxis": axis,
            "hovertemplate": "S = 2^%{x}: %{y:.4g}<extra>" + name + "</extra>",
        }

    data = [
        curve(sweep.rel_error, "gradient error vs float32", ERROR_COLOR, "y"),
        curve(sweep.underflow_share, "% entries lost to zero", PARAM_COLORS["bias"], "y2", 100),
        curve(sweep.nonfinite_share, "% entries non-finite", OVERFLOW_COLOR, "y2", 100)
        | {"line": {"color": OVERFLOW_COLOR, "dash": "dot"}},
        curve(sweep.new_loss, f"new loss ({dtype})", MIXED_COLOR, "y3"),
        {
            "type": "scatter",
            "mode": "lines",
            "x": [x[0], x[-1]],
            "y": [sweep.float32_new_loss] * 2,
            "name": "new loss (float32)",
            "line": {"color": FLOAT32_COLOR, "dash": "dash"},
            "xaxis": "x",
            "yaxis": "y3",
        },
    ]
    shapes = [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": sweep.exponents[first] - 0.5,
            "x1": sweep.exponents[last] + 0.5,
            "y0": 0,
            "y1": 1,
            "fillcolor": BAND_COLORS["normal"],
            "line": {"width": 0},
            "layer": "below",
        }
        for first, last in _runs(sweep.safe)
    ]
    current = math.log2(sweep.config.loss_scale)
    shapes.append(
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": current,
            "x1": current,
            "y0": 0,
            "y1": 1,
            "line": {"color": TEXT_COLOR, "dash": "dot", "width": 2},
        }
    )
    layout = _layout(
        f"Loss-scale sweep ({dtype}): green = as close to float32 as {dtype} gets",
        "log2 loss scale S",
        "",
        shapes=shapes,
        annotations=[
            {
                "x": current,
                "y": 1,
                "xref": "x",
                "yref": "paper",
                "yanchor": "bottom",
                "text": f"your S = 2^{current:.3g}",
                "showarrow": False,
            }
        ],
        height=620,
    )
    layout["xaxis"]["anchor"] = "y3"
    layout["yaxis"] = _axis("grad. error", type="log", dtick=1, domain=[0.7, 1.0])
    layout["yaxis2"] = _axis("% of entries", domain=[0.37, 0.63], range=[-5, 105])
    layout["yaxis3"] = _axis("new loss", domain=[0.0, 0.3])
    layout["legend"] = LEGEND_BELOW
    layout["margin"]["b"] = 110
    return {"data": data, "layout": layout}


def _line(x: list, values: np.ndarray, name: str, color: str, **extra: Any) -> Figure:
    return {
        "type": "scatter",
        "mode": "lines",
        "x": x,
        "y": [float(v) if np.isfinite(v) else None for v in values],
        "name": name,
        "line": {"color": color, "width": 2},
        "hovertemplate": "step %{x}: %{y:.6g}<extra>" + name + "</extra>",
        **extra,
    }


def dynamics_loss_figure(dynamics: DynamicsReport) -> Figure:
    """float32 loss of the three runs' parameters, step by step (log scale)."""
    dtype = dynamics.config.compute_dtype
    picked = _subsample(dynamics.steps)
    x = picked.tolist()
    data = [
        _line(x, dynamics.float32_loss[picked], "float32", FLOAT32_COLOR),
        _line(x, dynamics.mixed_loss[picked], f"mixed ({dtype}, float32 masters)", MIXED_COLOR),
        _line(
            x,
            dynamics.pure_loss[picked],
            f"pure {dtype} parameters",
            OVERFLOW_COLOR,
            line={"color": OVERFLOW_COLOR, "width": 2, "dash": "dash"},
        ),  # fmt: skip
    ]
    layout = _layout("Loss over the steps", "step", "MSE (float32, log scale)")
    layout["yaxis"]["type"] = "log"  # default ticks: a loss curve often spans less than 10x
    return {"data": data, "layout": layout}


def lost_update_figure(dynamics: DynamicsReport) -> Figure:
    """Share of parameter entries whose update was rounded away, per step, pure vs masters."""
    dtype = dynamics.config.compute_dtype
    picked = _subsample(dynamics.steps)
    x = picked.tolist()
    data = [
        _line(x, 100 * dynamics.pure_lost_share[picked], f"pure {dtype}", OVERFLOW_COLOR),
        _line(x, 100 * dynamics.mixed_lost_share[picked], "float32 masters", MIXED_COLOR),
    ]
    layout = _layout(
        "Lost-update meter: updates rounded away (p + delta == p)", "step", "% of entries"
    )
    layout["yaxis"]["range"] = [-3, 103]
    return {"data": data, "layout": layout}


def scale_figure(dynamics: DynamicsReport) -> Figure:
    """The loss scale over the steps (log2), skipped steps marked with crosses."""
    picked = _subsample(dynamics.steps)
    x = picked.tolist()
    skipped = np.flatnonzero(dynamics.mixed_skipped)[:MAX_POINTS]
    data = [
        _line(
            x,
            np.log2(dynamics.mixed_scale[picked]),
            "log2 loss scale",
            MIXED_COLOR,
            line={"color": MIXED_COLOR, "width": 2, "shape": "hv"},
        ),  # fmt: skip
        {
            "type": "scatter",
            "mode": "markers",
            "x": skipped.tolist(),
            "y": np.log2(dynamics.mixed_scale[skipped]).tolist(),
            "name": f"skipped update ({int(dynamics.mixed_skipped.sum())})",
            "marker": {"symbol": "x", "size": 9, "color": OVERFLOW_COLOR},
            "hovertemplate": "step %{x} skipped at S = 2^%{y}<extra></extra>",
        },
    ]
    title = f"Loss scale over the steps ({dynamics.mode} scaling, mixed run)"
    layout = _layout(title, "step", "log2 S")
    layout["showlegend"] = True  # keep the skipped-update entry visible even when it is empty
    return {"data": data, "layout": layout}


DYNAMICS_FIGURES = (dynamics_loss_figure, lost_update_figure, scale_figure)


FIGURES = (
    loss_figure,
    gradient_histograms,
    gradient_scatter,
    relative_error_histogram,
    update_size_histogram,
    magnitude_histogram,
)


def all_figures(report: StepReport) -> list[Figure]:
    """Every figure of the page, in page order."""
    return [figure(report) for figure in FIGURES]
