"""Plotly building blocks written once: colours, axes, layouts, binned traces, bands.

Rule: a figure is a plain Plotly JSON dict ({"data": [...], "layout": {...}}) built from numpy
arrays after binning or subsampling, so it carries at most a few thousand numbers whatever the
shapes. Dicts cost microseconds to build, where ``plotly.graph_objects`` validation would cost
milliseconds per figure on every run; tests validate every dict with
``plotly.graph_objects.Figure``.

Readable anywhere: Gradio's ``gr.Plot`` hands the figure to Plotly.js as is, whatever the page
theme (it applies no template and no theme colours). Every figure therefore paints its own opaque
CHART_BACKGROUND and writes its text in TEXT_COLOR (over 10:1 on it), so it reads the same in
Plotly's PNG download and in any other viewer; in the page's dark theme the page's script swaps
each colour of DARK_PALETTE for its dark counterpart. Axes show tiny and huge numbers in exponent
notation (2e-08), never with SI suffixes (Plotly's default writes 20n). ``with_description``
gives a figure its text alternative, the key numbers of its data in words.
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
WARNING_TEXT_COLOR = "#b3261e"  # dark red: text naming a non-finite value, 6.5:1 on white
TEXT_COLOR = "#374151"  # dark grey: 10.3:1 contrast on CHART_BACKGROUND
CHART_BACKGROUND = "#ffffff"  # opaque, so the contrast does not depend on the page theme
GRID_COLOR = "rgba(140, 140, 140, 0.25)"
COUNT_FORMAT = ",~r"  # d3 format of count axes: 1,000 and 20,000, never 1e+3 or 20k
# d3 format of log axes: whole values (0.04, 0.2, 1e-07), not Plotly's digit-only minor labels
LOG_FORMAT = "~g"
BINS = 60
MAX_POINTS = 2000  # per scatter trace
BAND_COLORS = {
    "flushed to 0": "rgba(225, 87, 89, 0.16)",
    "subnormal": "rgba(242, 142, 43, 0.16)",
    "subnormal, flushed here": "rgba(124, 58, 237, 0.16)",
    "normal": "rgba(89, 161, 79, 0.10)",
    "overflow": "rgba(225, 87, 89, 0.16)",
    "lost to 0": "rgba(225, 87, 89, 0.16)",  # a block recipe's bands, in its blocks' units
    "saturates": "rgba(225, 87, 89, 0.16)",
}
# Each band's label in its band's hue (darkened past 4.5:1 on white), so two narrow neighbours'
# stacked labels ("flushed to 0" red, "subnormal, flushed here" violet) each name their own band.
BAND_TEXT_COLORS = {
    "flushed to 0": WARNING_TEXT_COLOR,
    "subnormal": "#9a4a00",  # 6.4:1
    "subnormal, flushed here": "#6d28d9",  # 7.1:1
    "normal": "#2f6b26",  # 6.6:1
    "overflow": WARNING_TEXT_COLOR,
    "lost to 0": WARNING_TEXT_COLOR,
    "saturates": WARNING_TEXT_COLOR,
}

# The dark theme's counterparts of the light palette's text and paper colours (the data colours
# read on both): text 12.6:1 and warnings 7.8:1 on DARK_BACKGROUND.
DARK_BACKGROUND = "#1f2937"
DARK_PALETTE = {
    CHART_BACKGROUND: DARK_BACKGROUND,
    TEXT_COLOR: "#e5e7eb",
    WARNING_TEXT_COLOR: "#fca5a5",
    BAND_TEXT_COLORS["subnormal"]: "#fdba74",
    BAND_TEXT_COLORS["subnormal, flushed here"]: "#c4b5fd",
    BAND_TEXT_COLORS["normal"]: "#86efac",
}

# At the bottom of the whole figure, not at a fraction of the plot's height: Plotly then grows
# the bottom margin to fit it under the tick labels and the axis title, even when a phone's
# width turns the tick labels on end.
LEGEND_BELOW = {"orientation": "h", "yref": "container", "yanchor": "bottom", "y": 0, "x": 0}


def axis(title: str, **extra: Any) -> dict[str, Any]:
    """An axis titled ``title`` whose tick labels use exponent notation (2e-08), not SI (20n)."""
    return {
        "title": {"text": title},
        "gridcolor": GRID_COLOR,
        "zerolinecolor": GRID_COLOR,
        "automargin": True,
        "exponentformat": "e",
        "showexponent": "all",
        **extra,
    }


def base_layout(title: str, x_title: str, y_title: str, **extra: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 14}},
        "xaxis": axis(x_title),
        "yaxis": axis(y_title),
        "font": {"color": TEXT_COLOR, "size": 12},
        "paper_bgcolor": CHART_BACKGROUND,
        "plot_bgcolor": CHART_BACKGROUND,
        "legend": LEGEND_BELOW,  # above the plot it would share the title's place
        "margin": {"l": 10, "r": 10, "t": 70, "b": 10},
        "autosize": True,
        "hovermode": "closest",
        **extra,
    }


def empty_note(text: str) -> dict[str, Any]:
    """A note across the middle of a chart that has nothing to draw, saying why."""
    return {
        "x": 0.5,
        "y": 0.5,
        "xref": "paper",
        "yref": "paper",
        "text": text,
        "showarrow": False,
        "font": {"color": WARNING_TEXT_COLOR, "size": 13},
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
    layout = base_layout(full_title, x_title, "entries", barmode="overlay")
    layout["yaxis"]["tickformat"] = COUNT_FORMAT
    if not any(values.size for values in logs.values()):  # on a plain axis, saying why
        layout["annotations"] = [
            empty_note(f"nothing to draw: no entry is positive and finite ({'; '.join(notes)})")
        ]
        layout["xaxis"]["range"], layout["yaxis"]["range"] = [-1, 1], [0, 1]
    return {"data": data, "layout": layout}


# Band labels: stacked in rows above the plot so that no two overlap on a plot area at least
# NARROWEST_PLOT px wide (a phone's); a wider plot only moves them further apart.
LABEL_SIZE = 11  # px
LABEL_WIDTH_PER_CHAR = 0.62  # of LABEL_SIZE: wider than the average letter of Open Sans,
# Arial, Verdana and DejaVu Sans (about 0.5-0.59)
LABEL_GAP = 6  # px between two labels in one row
LABEL_ROW = LABEL_SIZE + 5  # px from one row to the next
NARROWEST_PLOT = 260  # px


def label_rows(centres: list[float], texts: list[str], span: float) -> list[int]:
    """The row of each label (0 = just above the plot) centred at ``centres`` on an axis of
    length ``span``: left to right, each label takes the lowest row where it clears every label
    already there by LABEL_GAP, its width estimated as LABEL_WIDTH_PER_CHAR of LABEL_SIZE per
    character, on a plot NARROWEST_PLOT px wide. Generic on band widths: two narrow bands side
    by side (bfloat16's flush and subnormal bands, float8's 3-binade subnormal band) stack."""
    taken: dict[int, list[tuple[float, float]]] = {}
    rows = [0] * len(centres)
    for index in sorted(range(len(centres)), key=centres.__getitem__):
        middle = centres[index] / span * NARROWEST_PLOT
        half = len(texts[index]) * LABEL_SIZE * LABEL_WIDTH_PER_CHAR / 2 + LABEL_GAP / 2
        left, right = middle - half, middle + half
        row = 0
        while any(left < end and start < right for start, end in taken.get(row, [])):
            row += 1
        taken.setdefault(row, []).append((left, right))
        rows[index] = row
    return rows


def band(x0: float, x1: float, label: str) -> tuple[dict, dict]:
    """A shaded vertical band over the whole plot height, labelled just above the plot (raise
    the label by setting its ``yshift``, see ``label_rows``)."""
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
        "y": 1.0,
        "xref": "x",
        "yref": "paper",
        "yanchor": "bottom",
        "text": label,
        "showarrow": False,
        "font": {"size": LABEL_SIZE, "color": BAND_TEXT_COLORS.get(label, TEXT_COLOR)},
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
