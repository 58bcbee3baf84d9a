"""The Block scaling tab's map: log2 of each block's scale, of the first layer's input and kernel.

Rule: the two maps (x: its rows by its blocks along D_in; the kernel: its block grid) share one
colour axis; a block of zeros (NaN scale) is left blank. A map of more than MAP_CELLS[0] rows
or MAP_CELLS[1] columns is drawn in groups of whole rows and columns, each group showing the
largest log2 scale among its blocks (so an outlier's block stays visible), with the groups
placed at their first row and column and the axis titles saying the group size; the chart
then sends at most MAP_CELLS cells per map, not every block of a large batch.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from playground.core.step.report import StepReport
from playground.views.plotly import base_layout, empty_note

BLOCK_FIGURE = "block_plot"
MAP_CELLS = (256, 64)  # at most this many rows and columns drawn per map (the default batch: all)


def group_size(shape: tuple[int, int]) -> tuple[int, int]:
    """(gr, gc): the smallest groups of whole rows and columns of a map of ``shape`` that
    leave at most MAP_CELLS of them; (1, 1) for a map that fits."""
    return math.ceil(shape[0] / MAP_CELLS[0]), math.ceil(shape[1] / MAP_CELLS[1])


def grouped(values: np.ndarray) -> tuple[np.ndarray, tuple[int, int]]:
    """``values`` (rows, columns) in groups of ``group_size``, each the largest finite value
    of its group (NaN where none is), and that group size."""
    rows, columns = values.shape
    size = group_size(values.shape)
    if size == (1, 1):
        return values, size
    padded = np.full(
        (math.ceil(rows / size[0]) * size[0], math.ceil(columns / size[1]) * size[1]), np.nan
    )
    padded[:rows, :columns] = values
    tiles = padded.reshape(padded.shape[0] // size[0], size[0], padded.shape[1] // size[1], -1)
    with warnings.catch_warnings():  # an all-NaN group: numpy warns, and answers NaN anyway
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmax(tiles, axis=(1, 3)), size


def _heatmap(values: np.ndarray, axes: tuple[str, str], name: str) -> dict[str, Any]:
    """One map (see the rule) on the shared colour axis."""
    cells, (rows, columns) = grouped(np.asarray(values, np.float64))
    what = "log2 scale" if (rows, columns) == (1, 1) else "largest log2 scale"
    return {
        "type": "heatmap",
        "name": name,
        "z": np.where(np.isfinite(cells), cells, None).tolist(),
        "x0": 0,
        "dx": columns,
        "y0": 0,
        "dy": rows,
        "xaxis": axes[0],
        "yaxis": axes[1],
        "coloraxis": "coloraxis",
        "hovertemplate": f"{name}: block %{{x}}, row %{{y}}: {what} %{{z:.3g}}<extra></extra>",
    }


def _axis(base: dict[str, Any], title: str, count: int, group: int) -> dict[str, Any]:
    """An axis over ``count`` indices, ticked on about four whole ones (space for both maps on a
    phone), titled with its group size when grouped."""
    grouped_title = title if group == 1 else f"{title} (groups of {group}: the largest)"
    return {
        **base,
        "tick0": 0,
        "dtick": max(1, math.ceil(count / 4)),
        "title": {"text": grouped_title},
    }


def block_scale_figure(report: StepReport) -> dict[str, Any]:
    """The two maps of the rule, side by side."""
    blocks = report.blocks
    layout = base_layout("Block scales (log2) of the first layer", "block", "row")
    if blocks is None:
        layout["annotations"] = [
            empty_note("No block scales: the compute dtype is not block-scaled.")
        ]
        return {"data": [], "layout": layout}
    maps = {role: np.asarray(blocks.operands[role].scale_log2) for role in blocks.operands}
    (rows, columns), (kernel_rows, kernel_columns) = (maps[r].shape for r in ("input", "kernel"))
    (row_group, column_group), (kernel_row_group, kernel_column_group) = (
        group_size(maps[r].shape) for r in ("input", "kernel")
    )
    x, y = layout["xaxis"], layout["yaxis"]
    layout |= {
        "xaxis": {**_axis(x, "x: block along D_in", columns, column_group), "domain": [0, 0.45]},
        "xaxis2": {
            **_axis(x, "kernel: block column", kernel_columns, kernel_column_group),
            "domain": [0.55, 1],
        },
        "yaxis": {**_axis(y, "row of x", rows, row_group), "autorange": "reversed"},
        "yaxis2": {
            **_axis(y, "kernel block row", kernel_rows, kernel_row_group),
            "anchor": "x2",
            "autorange": "reversed",
        },
        "coloraxis": {"colorscale": "Viridis", "colorbar": {"title": {"text": "log2 scale"}}},
    }
    data = [
        _heatmap(maps["input"], ("x", "y"), "input x"),
        _heatmap(maps["kernel"], ("x2", "y2"), "kernel"),
    ]
    return {"data": data, "layout": layout}
