"""Plotly figures of the precision lab: gradient magnitudes against the dtype's ranges, sweep."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from playground.core.formats.dtypes import log2_magnitude_bands
from playground.core.recipes.block_formats import element_facts
from playground.core.recipes.registry import RECIPES, recipe
from playground.core.runs.sweep import SweepReport
from playground.core.step.report import LOG2_LOW, StepReport
from playground.sections.lab.notes import activation_note, sweep_gap_notes
from playground.views.plotly import (
    BAND_COLORS,
    COUNT_FORMAT,
    ERROR_COLOR,
    FLOAT32_COLOR,
    LABEL_GAP,
    LABEL_ROW,
    LABEL_SIZE,
    LEGEND_BELOW,
    LOG_FORMAT,
    MIXED_COLOR,
    OVERFLOW_COLOR,
    PARAM_COLORS,
    TEXT_COLOR,
    Figure,
    axis,
    band,
    base_layout,
    label_rows,
    true_runs,
)

SUBNORMAL_FLUSHED_LABEL = "subnormal, flushed here"
# Under Plotly's 450 px, so the magnitude figure fits the first screen at 1400 x 1000 under
# the lesson row, the headline, the counts and their note.
FIGURE_HEIGHT = 390
# The two views of the gradients, named alike in the chart's legend and the counters table.
SCALED_LABEL = "scaled (as the backward pass holds them)"
UNSCALED_LABEL = "after unscaling (÷ S, float32)"
# A block recipe's two views, in its blocks' units (``block_magnitude_histogram``).
BLOCK_SCALED_LABEL = "scaled gradient, in its blocks"
BLOCK_FLOAT32_LABEL = "float32 gradient at S = 1, in its blocks"


# The band labels of the magnitude axis: a plain format's ranges, and a block recipe's element
# format's ranges in its blocks' units (``core.recipes.block_places``).
PLAIN_BANDS = ("flushed to 0", "subnormal", "normal", "overflow")
BLOCK_BANDS = ("lost to 0", "subnormal", "normal", "saturates")
# At most this many numbered ticks, level (never turned on end) and apart from the "zeros" and
# "inf/NaN" ticks even on a phone's plot (about 300 px): Plotly turns crowded labels and then
# drops the outer ones.
MAX_TICKS = 6
TICK_STEPS = (1, 2, 4, 8, 16, 32, 64)


class BinadeAxis(NamedTuple):
    """A log2 axis with one bin per binade, a "zeros" and an "inf/NaN" slot, over dtype bands."""

    dtype: str
    low: int
    high: int
    edges: np.ndarray
    zero_x: float
    nonfinite_x: float
    gap: int
    labels: tuple[str, ...] = PLAIN_BANDS

    @property
    def step(self) -> int:
        """The tick step: the smallest of TICK_STEPS that leaves at most MAX_TICKS ticks."""
        span = self.high - self.low
        return next((s for s in TICK_STEPS if span / s <= MAX_TICKS), TICK_STEPS[-1])

    def layout(self, title: str, x_title: str) -> dict[str, Any]:
        """The figure layout: the dtype's shaded bands, ticks, a log count axis."""
        bands = log2_magnitude_bands(self.dtype)
        # On a backend that flushes this dtype's subnormals, the IEEE subnormal band is drawn
        # but named for what happens to values there: they become zero in the next operation.
        # (A block's elements are rounded in float32, where they are normal numbers.)
        flushed_here = bands["subnormals_flushed_here"] and self.labels == PLAIN_BANDS
        flush, subnormal, normal, beyond = self.labels
        if flushed_here:
            subnormal = SUBNORMAL_FLUSHED_LABEL
        top = top_edge(self.dtype, self.labels)
        pieces = [
            band(self.low, bands["rounds_to_zero"], flush),
            band(bands["rounds_to_zero"], bands["smallest_normal"], subnormal),
            band(bands["smallest_normal"], top, normal),
            band(top, self.high, beyond),
        ]
        first, last = self.zero_x - self.gap / 2, self.nonfinite_x + self.gap / 2
        notes = [note for _, note in pieces]
        rows = label_rows([n["x"] - first for n in notes], [n["text"] for n in notes], last - first)
        for note, row in zip(notes, rows, strict=True):
            note["yshift"] = row * LABEL_ROW
        step = self.step
        ticks = list(range(int(math.ceil(self.low / step) * step), self.high + 1, step))
        layout = base_layout(
            title,
            x_title,
            "entries (log scale)",
            barmode="overlay",
            shapes=[shape for shape, _ in pieces],
            annotations=notes,
        )
        layout["xaxis"].update(
            tickvals=[self.zero_x, *ticks, self.nonfinite_x],
            ticktext=["zeros", *[str(t) for t in ticks], "inf/NaN"],
            tickangle=0,
            range=[first, last],
        )
        # A tick per power of ten, no minor labels.
        layout["yaxis"].update(type="log", dtick=1, tickformat=COUNT_FORMAT)
        layout["legend"] = LEGEND_BELOW
        # The title is centred in the top margin: half the margin holds the highest label (its
        # row's lift and its own height), half the title's height and a gap of LABEL_GAP.
        highest = LABEL_ROW * max(rows) + 1.3 * LABEL_SIZE
        title_half = 0.65 * layout["title"]["font"]["size"]
        layout["margin"]["t"] = math.ceil(2 * (highest + title_half + LABEL_GAP))
        layout["height"] = FIGURE_HEIGHT
        return layout


def top_edge(dtype: str, labels: tuple[str, ...]) -> float:
    """log2 of where the last band starts: a plain format's max (beyond it, overflow); a block
    format's overflow edge (max plus half its last gap: a value below it rounds to max anyway,
    one beyond it saturates, as ``core.recipes.block_places`` counts it)."""
    if labels == BLOCK_BANDS:
        return math.log2(element_facts(dtype).overflow_edge)
    return log2_magnitude_bands(dtype)["max"]


def fixed_binade_span() -> tuple[float, float]:
    """One log2 range for every run: every recipe's gradient format's bands and float32's (the
    unscaled gradients), so switching dtype or scale moves the bars, never the axis."""
    formats = {"float32", *(entry.gradient_format for entry in RECIPES.values())}
    bands = [log2_magnitude_bands(name) for name in formats]
    return min(b["rounds_to_zero"] for b in bands), max(b["max"] for b in bands)


def dtype_binade_span(dtype: str) -> tuple[float, float]:
    """The log2 range of ``dtype``'s own bands, from below its flush edge to past its max."""
    bands = log2_magnitude_bands(dtype)
    return bands["rounds_to_zero"], bands["max"]


def binade_axis(
    dtype: str,
    smallest: float,
    largest: float,
    span: tuple[float, float] | None = None,
    labels: tuple[str, ...] = PLAIN_BANDS,
) -> BinadeAxis:
    """The axis over ``span`` (the fixed ``fixed_binade_span`` unless given), widened only for
    data beyond it to cover the data's log2 range [smallest, largest]; the "zeros" and
    "inf/NaN" slots one tick step beyond its ends."""
    fixed_low, fixed_high = fixed_binade_span() if span is None else span
    low = math.floor(min(fixed_low, smallest)) - 1
    high = math.ceil(max(fixed_high, largest)) + 1
    edges = np.arange(low, high + 1, dtype=np.float64)
    axis = BinadeAxis(dtype, low, high, edges, low, high, 0, labels)
    gap = max(3, axis.step)  # space for the "zeros" and "inf/NaN" ticks beside the numbered ones
    return axis._replace(zero_x=low - gap, nonfinite_x=high + gap, gap=gap)


def activation_histogram(report: StepReport) -> Figure:
    """Per hidden layer, input side first, log2 |activation gradient| (scaled, in the compute
    dtype) over the dtype's ranges: the "Mixed Precision Training" paper's figure, live.

    A block recipe's counts are in its blocks' units (``core.step.activation_counts``), over
    its element format's ranges, as ``block_magnitude_histogram`` draws the parameter gradients.
    Empty, with a title that says so, for a model without hidden layers.
    """
    block = recipe(report.config.compute_dtype).block
    dtype = recipe(report.config.compute_dtype).gradient_format  # float8: E5M2
    title = f"Activation gradients per hidden layer against {dtype}'s ranges"
    x_title = f"log2 |activation gradient|, {SCALED_LABEL}"
    labels = PLAIN_BANDS
    if block is not None:
        dtype = block.element_format
        title = (
            f"Activation gradients per hidden layer against {dtype}'s ranges, in {block.name}'s"
            " blocks"
        )
        x_title = f"log2 |entry| / its block's scale (blocks of {block.block} along the features)"
        labels = BLOCK_BANDS
    if not report.activations:  # a short box that says so, without empty axes
        layout = base_layout(
            title + "<br><sup>(the linear model has none: choose mlp)</sup>", "", "", height=120
        )
        layout["xaxis"]["visible"] = layout["yaxis"]["visible"] = False
        return {"data": [], "layout": layout}
    title += f"<br><sup>{activation_note(report)}</sup>"  # what to notice
    # The first bin holds no float32 binade: a block recipe's entries whose block scale flushed
    # to zero (units 0, ``core.step.activation_counts``), drawn with the zeros: stored as 0.
    live = [np.flatnonzero(a.log2_counts[1:]) + 1 for a in report.activations]
    present = (np.concatenate(live) + LOG2_LOW).astype(np.float64)
    smallest, largest = present.min(initial=np.inf), present.max(initial=-np.inf)
    axis = binade_axis(dtype, smallest, largest, dtype_binade_span(dtype), labels)
    data = []
    for activation in report.activations:
        counts = np.zeros(axis.edges.size - 1, np.int64)
        binades = np.arange(activation.log2_counts.size) + LOG2_LOW
        inside = (binades >= axis.low) & (binades < axis.high) & (binades > LOG2_LOW)
        counts[binades[inside] - axis.low] = activation.log2_counts[inside]
        zeros = activation.zero_count + int(activation.log2_counts[0])
        name = f"layer {activation.layer + 1}: {zeros / activation.size:.1%} zero"
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "line": {"shape": "hvh", "width": 2},
                "x": [axis.zero_x, *((axis.edges[:-1] + 0.5).tolist()), axis.nonfinite_x],
                "y": [zeros, *counts.tolist(), activation.nonfinite_count],
                "name": name,
                "hovertemplate": "%{y} entries at 2^%{x:.0f}<extra>" + name + "</extra>",
            }
        )
    layout = axis.layout(title, x_title)
    return {"data": data, "layout": layout}


def _log2_magnitudes(values: np.ndarray) -> np.ndarray:
    magnitudes = np.abs(values[np.isfinite(values) & (values != 0)])
    return np.log2(magnitudes.astype(np.float64))


def magnitude_histogram(report: StepReport) -> Figure:
    """log2 |gradient| per binade, scaled (backward pass) and unscaled, over the dtype's ranges.

    Exact zeros and non-finite entries get bars of their own left and right of the axis; the
    shaded bands are the compute dtype's flush-to-zero, subnormal, normal and overflow ranges,
    from ``jnp.finfo``; the axis spans them and the data (``dtype_binade_span``), so each
    dtype's range fills the chart. A block recipe's figure is ``block_magnitude_histogram``.
    """
    chosen = recipe(report.config.compute_dtype)
    if chosen.block is not None:
        return block_magnitude_histogram(report)
    dtype = chosen.gradient_format  # float8: E5M2
    series = {
        SCALED_LABEL: np.concatenate([p.scaled_grads.ravel() for p in report.params.values()]),
        UNSCALED_LABEL: np.concatenate([p.mixed_grads.ravel() for p in report.params.values()]),
    }
    logs = {name: _log2_magnitudes(values) for name, values in series.items()}
    title = f"Gradient magnitudes against {dtype}'s ranges"
    return _binade_figure(series, logs, dtype, PLAIN_BANDS, title, "log2 |gradient entry|")


def block_magnitude_histogram(report: StepReport) -> Figure:
    """For a block recipe: the gradient entries per binade in their blocks' units, over the
    element format's ranges (lost to 0 in its block, subnormal, normal, saturates)::

        x        = |value| / (block scale x tensor scale), what the quantizer rounds
                   (``core.recipes.block_places``)
        bars     the scaled gradients
        outline  float32's gradient at S = 1, stored by the same recipe

    The two coincide but for the paths' own differences: each block's scale absorbs the loss
    scale.
    """
    spec = recipe(report.config.compute_dtype).block
    params = list(report.params.values())
    series = {
        BLOCK_SCALED_LABEL: np.concatenate([p.scaled_grads.ravel() for p in params]),
        BLOCK_FLOAT32_LABEL: np.concatenate([p.float32_grads.ravel() for p in params]),
    }
    units = {BLOCK_SCALED_LABEL: "scaled", BLOCK_FLOAT32_LABEL: "float32"}
    logs = {name: _log2_magnitudes(report.block_units[view]) for name, view in units.items()}
    title = f"Gradient magnitudes against {spec.element_format}'s ranges, in {spec.name}'s blocks"
    x_title = f"log2 |entry| / its block's scale (blocks of {spec.block})"
    return _binade_figure(series, logs, spec.element_format, BLOCK_BANDS, title, x_title)


def _binade_figure(series, logs, dtype: str, labels, title: str, x_title: str) -> Figure:
    """Bars for the first series, an outline for the second, on ``dtype``'s binade axis."""
    present = np.concatenate(list(logs.values()))
    smallest, largest = present.min(initial=np.inf), present.max(initial=-np.inf)
    axis = binade_axis(dtype, smallest, largest, dtype_binade_span(dtype), labels)
    edges, zero_x, nonfinite_x = axis.edges, axis.zero_x, axis.nonfinite_x
    if labels == BLOCK_BANDS:
        # A narrow element format's overflow edge sits inside a binade (E2M1's 7 at 2^2.81):
        # that binade is split there, so no bar of kept values reaches into "saturates".
        edges = np.union1d(edges, [top_edge(dtype, labels)])
    centres, widths = (edges[:-1] + edges[1:]) / 2, np.diff(edges)
    data = []
    for index, (name, values) in enumerate(series.items()):
        counts, _ = np.histogram(logs[name], bins=edges)
        zeros, nonfinite = int(np.sum(values == 0)), int(np.sum(~np.isfinite(values)))
        trace = {
            "x": [zero_x, *centres.tolist(), nonfinite_x],
            "y": [zeros, *counts.tolist(), nonfinite],
            "name": name,
            "hovertemplate": "%{y} entries at 2^%{x:.0f}<extra>" + name + "</extra>",
        }
        if index == 0:  # the scaled gradients as bars ...
            width = [1.0, *widths.tolist(), 1.0]
            trace.update(type="bar", width=width, marker={"color": MIXED_COLOR}, opacity=0.7)
        else:  # ... and the other view as an outline, so both stay visible where they overlap
            trace.update(
                type="scatter",
                mode="lines",
                line={"shape": "hvh", "color": FLOAT32_COLOR, "width": 2},
            )
        data.append(trace)
    return {"data": data, "layout": axis.layout(title, x_title)}


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
        for first, last in true_runs(sweep.safe)
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
    layout = base_layout(
        f"Loss-scale sweep ({dtype})<br><sup>green = as close to float32 as {dtype} gets</sup>",
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
            },
            *sweep_gap_notes(sweep),  # why a curve has no point there
        ],
        height=620,
    )
    layout["xaxis"]["anchor"] = "y3"
    layout["yaxis"] = axis(
        "grad. error", type="log", dtick=1, tickformat=LOG_FORMAT, domain=[0.7, 1.0]
    )
    layout["yaxis2"] = axis("% of entries", domain=[0.37, 0.63], range=[-5, 105])
    layout["yaxis3"] = axis("new loss", domain=[0.0, 0.3])
    layout["legend"] = LEGEND_BELOW
    return {"data": data, "layout": layout}
