"""The comparison's small multiples: each recipe's gradient errors by binade, one panel each.

Rule: one panel per row of the comparison, in the registry's order, COLUMNS to a line; every
panel has the same axes (log2 of the entries' relative error against float32 across, ERROR_LOW
to ERROR_HIGH; the share of the gradient's entries up, to the largest share of any panel), so
a recipe whose bars sit further right keeps fewer bits. Each panel's title names the recipe and
its error in norm; the entries with no error, non-finite ones and undefined ones (float32's
entry 0) are counted in a line under it rather than drawn.
"""

from __future__ import annotations

import math

import numpy as np

from playground.core.compare.comparison import ERROR_HIGH, ERROR_LOW, EXTRA_BINS, Comparison
from playground.views.plotly import MIXED_COLOR, TEXT_COLOR, Figure, axis, base_layout

COLUMNS = 3
FIGURE_TITLE = "Each recipe's gradient entries by relative error against float32 (log2)"
PANEL_HEIGHT = 210  # px per line of panels
GAP = 0.06  # of the figure, between panels


def _domains(count: int, gap: float) -> list[tuple[float, float]]:
    """``count`` equal spans of [0, 1] with ``gap`` between them."""
    width = (1 - gap * (count - 1)) / count
    return [(index * (width + gap), index * (width + gap) + width) for index in range(count)]


def comparison_figure(comparison: Comparison) -> Figure:
    """The small multiples of the module rule."""
    rows = comparison.rows
    lines = math.ceil(len(rows) / COLUMNS)
    columns = _domains(COLUMNS, GAP)
    heights = _domains(lines, 0.16)[::-1]  # the first line on top
    binades = list(range(ERROR_LOW, ERROR_HIGH + 1))
    shares = [row.error_counts[: len(binades)] / row.entries for row in rows]
    top = max(float(np.max(share)) for share in shares) or 1.0
    data, annotations = [], []
    layout = base_layout(FIGURE_TITLE, "", "", height=PANEL_HEIGHT * lines + 90, showlegend=False)
    del layout["xaxis"], layout["yaxis"]
    for index, (row, share) in enumerate(zip(rows, shares, strict=True)):
        suffix = "" if index == 0 else str(index + 1)
        x0, x1 = columns[index % COLUMNS]
        y0, y1 = heights[index // COLUMNS]
        data.append(
            {
                "type": "bar",
                "x": binades,
                "y": share.tolist(),
                "name": row.recipe,
                "marker": {"color": MIXED_COLOR},
                "xaxis": f"x{suffix}",
                "yaxis": f"y{suffix}",
                "hovertemplate": "%{y:.2%} of entries off by 2^%{x} to 2^(%{x}+1)<extra>"
                + row.recipe
                + "</extra>",
            }
        )
        bottom = index // COLUMNS == lines - 1
        layout[f"xaxis{suffix}"] = axis(
            "log2 relative error" if bottom else "",
            domain=[x0, x1],
            range=[ERROR_LOW - 0.5, ERROR_HIGH + 0.5],
            anchor=f"y{suffix}",
            dtick=4,
        )
        layout[f"yaxis{suffix}"] = axis(
            "share of entries" if index % COLUMNS == 0 else "",
            domain=[y0, y1],
            range=[0, top * 1.1],
            anchor=f"x{suffix}",
            tickformat=".0%",
        )
        extra = dict(zip(EXTRA_BINS, row.error_counts[len(binades) :].tolist(), strict=True))
        counted = ", ".join(f"{name} {count:,}" for name, count in extra.items())
        annotations.append(
            {
                "x": (x0 + x1) / 2,
                "y": y1,
                "xref": "paper",
                "yref": "paper",
                "yanchor": "bottom",
                "showarrow": False,
                "text": f"<b>{row.recipe}</b>: error {row.grad_rel_error:.3g}<br>{counted}",
                "font": {"size": 11, "color": TEXT_COLOR},
            }
        )
    layout["annotations"] = annotations
    layout["margin"] = {"l": 10, "r": 10, "t": 90, "b": 10}
    return {"data": data, "layout": layout}
