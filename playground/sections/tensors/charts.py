"""The magnitude figure of one of a user's tensors, against every value format's ranges.

Rule: the step's magnitude figure (``sections.lab.charts.binade_axis``: one bar per binade of
log2 |entry| on the fixed axis every run shares, a bar for exact zeros at the left and one for
inf/NaN at the right, one format's bands shaded) over a strip per value format below it, on
the same x axis: each format's subnormal range (from the log2 of half its smallest subnormal,
at or below which a cast gives 0) and its normal range (up to its largest value). The shaded
format is the one chosen on the page, else the plain-cast recipes' dtype (where a loss scale is
the remedy) that rounds most of the tensor to zero or saturates most of it, then any format (the
registry's first on a tie).
"""

from __future__ import annotations

import numpy as np

from playground.core.formats.dtypes import log2_magnitude_bands
from playground.core.recipes.registry import RECIPES
from playground.core.tensors.formats import VALUE_FORMATS
from playground.core.tensors.report import TensorReport
from playground.sections.lab.charts import FIGURE_HEIGHT, binade_axis
from playground.views.plotly import MIXED_COLOR, Figure, base_layout

# The histogram's share of the plot's height; the format strips take the rest below it.
HISTOGRAM_DOMAIN = (0.34, 1.0)
STRIPS_DOMAIN = (0.0, 0.27)
STRIP_HEIGHT = 22  # px per format
# The dtypes of the plain-cast recipes: where a loss scale is the remedy for a flushed entry.
LOSS_SCALED_FORMATS = tuple(r.plain_dtype for r in RECIPES.values() if r.plain_dtype is not None)
STRIP_COLORS = {"subnormal": "rgba(242, 142, 43, 0.55)", "normal": "rgba(89, 161, 79, 0.45)"}


def shaded_format(tensor: TensorReport) -> str:
    """The format shaded first (see the module rule)."""

    def lost(fmt: str) -> tuple[float, float]:
        shares = tensor.formats.get(fmt)
        share = 0.0 if shares is None else (shares.zero or 0.0) + (shares.saturated or 0.0)
        return (share if fmt in LOSS_SCALED_FORMATS else -1.0), share

    return max(VALUE_FORMATS, key=lambda fmt: (*lost(fmt), -VALUE_FORMATS.index(fmt)))


def _strips() -> list[dict]:
    """Two horizontal bar traces on y2: each format's subnormal and normal range."""
    traces = []
    for kind, (start, end) in {
        "subnormal": ("rounds_to_zero", "smallest_normal"),
        "normal": ("smallest_normal", "max"),
    }.items():
        bands = [log2_magnitude_bands(fmt) for fmt in VALUE_FORMATS]
        traces.append(
            {
                "type": "bar",
                "orientation": "h",
                "yaxis": "y2",
                "y": list(VALUE_FORMATS),
                "base": [b[start] for b in bands],
                "x": [b[end] - b[start] for b in bands],
                "customdata": [[b[start], b[end]] for b in bands],
                "marker": {"color": STRIP_COLORS[kind]},
                "name": f"{kind} range",
                "hovertemplate": "%{y} "
                + kind
                + ": 2^%{customdata[0]:.1f} to 2^%{customdata[1]:.1f}<extra></extra>",
            }
        )
    return traces


def tensor_figure(tensor: TensorReport, fmt: str | None = None) -> Figure:
    """log2 |entry| of ``tensor`` per binade over ``fmt``'s bands and every format's strip."""
    shaded = fmt if fmt in VALUE_FORMATS else shaded_format(tensor)
    summary = tensor.magnitudes
    title = f"{tensor.name[:80]}: magnitudes against {shaded}'s ranges"
    if summary is None:
        layout = base_layout(title + "<br><sup>(not floating point: not analysed)</sup>", "", "")
        layout["height"] = 120
        layout["xaxis"]["visible"] = layout["yaxis"]["visible"] = False
        return {"data": [], "layout": layout}
    counts = summary.log2_counts
    high = summary.log2_low + counts.size - 1
    smallest, largest = (summary.log2_low, high + 1) if counts.size else (np.inf, -np.inf)
    axis = binade_axis(shaded, smallest, largest)
    binned = np.zeros(axis.edges.size - 1, np.int64)
    binned[summary.log2_low - axis.low : summary.log2_low - axis.low + counts.size] = counts
    bars = {
        "type": "bar",
        "x": [axis.zero_x, *((axis.edges[:-1] + 0.5).tolist()), axis.nonfinite_x],
        "y": [summary.zeros, *binned.tolist(), summary.nonfinite],
        "width": 1.0,
        "marker": {"color": MIXED_COLOR},
        "opacity": 0.8,
        "name": f"entries ({tensor.dtype}, as stored)",
        "hovertemplate": "%{y} entries at 2^%{x:.0f}<extra></extra>",
    }
    layout = axis.layout(title, "log2 |entry|")
    for shape in layout["shapes"]:
        shape["y0"] = HISTOGRAM_DOMAIN[0]
    layout["yaxis"]["domain"] = list(HISTOGRAM_DOMAIN)
    layout["xaxis"]["anchor"] = "y2"
    layout["yaxis2"] = {
        "domain": list(STRIPS_DOMAIN),
        "type": "category",
        "autorange": "reversed",
        "automargin": True,
        "fixedrange": True,
    }
    layout["barmode"] = "overlay"
    layout["height"] = FIGURE_HEIGHT + STRIP_HEIGHT * len(VALUE_FORMATS)
    return {"data": [bars, *_strips()], "layout": layout}
