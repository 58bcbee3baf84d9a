"""Plotly building blocks written once: colours, axes, layouts, binned traces, bands.

Rule: a figure is a plain Plotly JSON dict ({"data": [...], "layout": {...}}) built from numpy
arrays after binning or subsampling, so it carries at most a few thousand numbers whatever the
shapes. Dicts cost microseconds to build, where ``plotly.graph_objects`` validation would cost
milliseconds per figure on every run; tests validate every dict with
``plotly.graph_objects.Figure``. Colours and fonts are chosen to read on light and dark pages.
"""

from __future__ import annotations

from typing import Any

import numpy as np

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
BAND_COLORS = {
    "flushed to 0": "rgba(225, 87, 89, 0.16)",
    "subnormal": "rgba(242, 142, 43, 0.16)",
    "subnormal, flushed here": "rgba(225, 87, 89, 0.10)",
    "normal": "rgba(89, 161, 79, 0.10)",
    "overflow": "rgba(225, 87, 89, 0.16)",
}

LEGEND_BELOW = {"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0}


def axis(title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title},
        "gridcolor": GRID_COLOR,
        "zerolinecolor": GRID_COLOR,
        "automargin": True,
        **extra,
    }


def base_layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}},
        "xaxis": axis(x_title),
        "yaxis": axis(y_title),
        "font": {"color": TEXT_COLOR, "size": 12},
        "paper_bgcolor": "rgba(0,0,0,0)",
        "plot_bgcolor": "rgba(0,0,0,0)",
        "legend": {"orientation": "h", "yanchor": "bottom", "y": 1.0, "x": 0},
        "margin": {"l": 10, "r": 10, "t": 70, "b": 10},
        "autosize": True,
        "hovermode": "closest",
        **extra,
    }


def finite_values(values: np.ndarray) -> np.ndarray:
    flat = values.ravel()
    return flat[np.isfinite(flat)]


def bin_edges(*arrays: np.ndarray) -> np.ndarray:
    """Equal-width bin edges spanning the finite values of all arrays.

    BINS bins, or about 2 * sqrt(entries) for small arrays (16 bias entries get 8 bins, not 60).
    """
    finite = np.concatenate([finite_values(a) for a in arrays]) if arrays else np.zeros(0)
    bins = int(min(BINS, max(4, 2 * np.sqrt(max(a.size for a in arrays) if arrays else 0))))
    if finite.size == 0:
        return np.linspace(-1.0, 1.0, bins + 1)
    low, high = float(finite.min()), float(finite.max())
    if low == high:
        low, high = low - 0.5, high + 0.5
    return np.linspace(low, high, bins + 1)


def bar_trace(
    values: np.ndarray,
    edges: np.ndarray,
    name: str,
    color: str,
    hover: str = "%{y} entries near %{x:.3g}",
    **extra: Any,
) -> Figure:
    counts, _ = np.histogram(finite_values(values), bins=edges)
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


def not_shown(values: np.ndarray) -> str:
    hidden = int(values.size - np.isfinite(values).sum())
    return f" ({hidden:,} non-finite not shown)" if hidden else ""


def subsample(count: int) -> np.ndarray:
    """Evenly spaced indices, at most MAX_POINTS of them."""
    return np.unique(np.linspace(0, count - 1, min(count, MAX_POINTS)).astype(np.int64))


def log10_histogram(title: str, x_title: str, arrays: dict[str, np.ndarray]) -> Figure:
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
    edges = bin_edges(*logs.values())
    hover = "%{y} entries near 10^%{x:.2f}"
    data = [
        bar_trace(values, edges, name, param_color(name), hover) for name, values in logs.items()
    ]
    full_title = title + ("<br><sup>" + "; ".join(notes) + "</sup>" if notes else "")
    return {"data": data, "layout": base_layout(full_title, x_title, "entries", barmode="overlay")}


def band(x0: float, x1: float, label: str, y: float = 1.0) -> tuple[dict, dict]:
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


def true_runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """(first, last) index of each run of True in ``mask``."""
    runs, start = [], None
    for index, flag in enumerate([*mask.tolist(), False]):
        if flag and start is None:
            start = index
        elif not flag and start is not None:
            runs.append((start, index - 1))
            start = None
    return runs


def line_trace(x: list, values: np.ndarray, name: str, color: str, **extra: Any) -> Figure:
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


def param_color(name: str) -> str:
    """The colour of a parameter by the last part of its path (kernel, bias); grey otherwise."""
    return PARAM_COLORS.get(name.rsplit(".", 1)[-1], TEXT_COLOR)
