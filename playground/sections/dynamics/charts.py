"""Plotly figures of the training dynamics: losses, the lost-update meter, the loss scale.

Rule: each figure draws one run (a ``DynamicsReport`` or its ``RunCurves``) in the section's
colours and, given pinned runs (``sections.dynamics.pins``), overlays each pin in a colour of its
own, its legend group titled by the settings that differ (``pinned: loss_scale=1``) and the
current run's by its own (``this run: loss_scale=32768``); a pinned curve equal to the current
run's is not drawn twice (``sections.dynamics.overlay``). A loss curve that stops being finite
ends with a marker naming the step and the cause its run shows (``sections.dynamics.nan_marks``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from playground.core.runs.train import DynamicsReport
from playground.sections.dynamics.curves import RunCurves, as_curves
from playground.sections.dynamics.overlay import nan_traces, overlay
from playground.sections.dynamics.pins import same_curve
from playground.sections.dynamics.summary import ROUNDING_NAMES
from playground.views.plotly import (
    FLOAT32_COLOR,
    LOG_FORMAT,
    MAX_POINTS,
    MIXED_COLOR,
    OVERFLOW_COLOR,
    Figure,
    base_layout,
    line_trace,
    subsample,
)

Run = DynamicsReport | RunCurves
# The line of each run's curve: the current run in its colours, a pin in its own, dashed alike.
DASHES = {"float32": "solid", "mixed": "solid", "pure": "dash"}
PIN_DASHES = {"float32": "dot", "mixed": "solid", "pure": "dash"}
RUN_COLORS = {"float32": FLOAT32_COLOR, "mixed": MIXED_COLOR, "pure": OVERFLOW_COLOR}
# Points per pinned curve: four pins of 1,000 steps would otherwise send ~0.55 MB per redraw.
PIN_POINTS = 400


def _loss_names(run: RunCurves) -> dict[str, str]:
    dtype = run.compute_dtype
    return {
        "float32": "float32",
        "mixed": f"mixed ({dtype}, float32 masters)",
        "pure": f"pure {dtype} parameters ({ROUNDING_NAMES[run.pure_rounding]})",
    }


def _picked(count: int, points: int) -> np.ndarray:
    """Evenly spaced indices of ``count`` values, the first and last among them, at most
    ``points`` of them (the current run's curves take MAX_POINTS, a pin's PIN_POINTS)."""
    return (
        subsample(count)
        if points >= MAX_POINTS
        else np.unique(np.linspace(0, count - 1, min(count, points)).astype(np.int64))
    )


def _loss_traces(
    run: RunCurves,
    colors: dict[str, str],
    dashes: dict[str, str],
    runs: Sequence[str] = ("float32", "mixed", "pure"),
    points: int = MAX_POINTS,
) -> list[Figure]:
    picked = _picked(run.steps + 1, points)
    x = picked.tolist()  # the number of updates applied: 0 is the initial loss
    curve_names = _loss_names(run)
    data = [
        line_trace(
            x,
            run.loss(name)[picked],
            curve_names[name],
            colors[name],
            line={"color": colors[name], "width": 2, "dash": dashes[name]},
        )
        for name in runs
    ]
    return data + nan_traces(run, {name: colors[name] for name in runs})


def dynamics_loss_figure(dynamics: Run, pins: Sequence[RunCurves] = ()) -> Figure:
    """float32 loss of the three runs' parameters after 0, 1, ..., K steps (log scale)."""
    current = as_curves(dynamics)
    layout = base_layout(
        "Loss over the steps", "step (0 = before training)", "MSE (float32, log scale)"
    )

    def pinned(pin: RunCurves, color: str) -> list[Figure]:
        runs = [
            name
            for name in ("float32", "mixed", "pure")
            if not same_curve(pin.loss(name), current.loss(name))
        ]
        return _loss_traces(pin, dict.fromkeys(runs, color), PIN_DASHES, runs, PIN_POINTS)

    own = _loss_traces(current, RUN_COLORS, DASHES)
    data = overlay(current, pins, own, pinned, layout)
    losses = np.concatenate([run.loss(name) for run in (current, *pins) for name in DASHES])
    layout["yaxis"].update(type="log", **loss_ticks(losses[np.isfinite(losses) & (losses > 0)]))
    return {"data": data, "layout": layout}


def loss_ticks(losses: np.ndarray, count: int = 5) -> dict[str, Any]:
    """The loss axis's ticks, each labelled with its value, by the span high / low of ``losses``::

        < 2.5     ``count`` ticks spread over the span, with as many digits as tell them apart
                  (such a span may hold no 1-2-5 tick at all)
        < 1000    ticks at 1, 2 and 5 per decade (Plotly's own labels every digit there)
        wider     Plotly's, one per decade or fewer

    Labels matter because a 1.5% change drawn over the whole height looks like a steep fall.

    >>> loss_ticks(np.array([0.1, 10.0]))["dtick"]
    'D2'
    >>> loss_ticks(np.array([1.183e-7, 1.201e-7]), count=3)["ticktext"]
    ['1.18e-07', '1.19e-07', '1.2e-07']
    """
    if not losses.size:
        return {"tickformat": LOG_FORMAT}
    low, high = float(losses.min()), float(losses.max())
    if high < 2.5 * low:
        values = np.geomspace(low, high, count) if high > low else np.array([low])
        for digits in range(3, 10):
            labels = [f"{value:.{digits}g}" for value in values]
            if len(set(labels)) == len(labels):
                break
        return {"tickmode": "array", "tickvals": values.tolist(), "ticktext": labels}
    if np.log10(high / low) < 3:
        return {"tickformat": LOG_FORMAT, "dtick": "D2"}
    return {"tickformat": LOG_FORMAT}


# What "lost" means for the pure run under each rounding (see DynamicsReport).
LOST_MEANING = {
    "nearest": "updates rounded away (p + delta == p)",
    "stochastic": "updates that rounded back to p this step (kept only on average)",
    "kahan": "updates that left no trace in p nor in the compensation buffer",
}


def _meter_traces(
    run: RunCurves,
    pure_color: str,
    mixed_color: str,
    runs: Sequence[str] = ("pure", "mixed"),
    points: int = MAX_POINTS,
) -> list[Figure]:
    picked = _picked(run.steps, points)
    x = (picked + 1).tolist()  # step k's update is the (k+1)-th: it lines up with the loss after
    hover = "step %{x}: %{y:.3g}% of entries<extra>"
    names = {
        "pure": f"pure {run.compute_dtype} ({ROUNDING_NAMES[run.pure_rounding]})",
        "mixed": "float32 masters",
    }
    colors = {"pure": pure_color, "mixed": mixed_color}
    return [
        line_trace(x, 100 * run.lost_share(name)[picked], names[name], colors[name])
        | {"hovertemplate": hover + f"{names[name]}</extra>"}
        for name in runs
    ]


FLUSHED_HOVER = "step %{x}: %{y:.3g}% of entries flushed"
# The two dotted lines of updates lost to a flushed gradient: told apart by their dash, not
# only by colour (the pure run's red and the masters' orange are near neighbours).
FLUSHED_DASHES = {"pure": "dashdot", "mixed": "dot"}


def _flushed_traces(
    run: RunCurves,
    colors: dict[str, str] | None = None,
    runs: Sequence[str] = ("pure", "mixed"),
    points: int = MAX_POINTS,
) -> list[Figure]:
    """The updates lost before the optimizer (their gradient underflowed), dotted, for the
    ``runs`` that lost any: rounding away cannot count them, so at S = 1 in float16 they are the
    loss. ``colors``: the run's own (the section's) unless given (a pin's)."""
    picked = _picked(run.steps, points)
    x = (picked + 1).tolist()
    names = {"pure": f"pure {run.compute_dtype}", "mixed": "float32 masters"}
    colors = colors or {"pure": OVERFLOW_COLOR, "mixed": MIXED_COLOR}
    return [
        line_trace(
            x,
            100 * run.flushed_share(name)[picked],
            f"{names[name]}: gradient flushed to 0",
            colors[name],
            line={"color": colors[name], "width": 2, "dash": FLUSHED_DASHES[name]},
        )
        | {"hovertemplate": f"{FLUSHED_HOVER}<extra>{names[name]}</extra>"}
        for name in runs
        if run.flushed_share(name).any()
    ]


def _saturated_trace(run: RunCurves, color: str, points: int = MAX_POINTS) -> Figure:
    """float8: the share of the mixed run's quantized entries that saturated at the format's
    largest value (delayed scaling clips the step after an amax jump)."""
    picked = _picked(run.steps, points)
    saturated = 100 * run.mixed_saturated_share[picked]
    name = f"{run.compute_dtype} entries saturated (mixed run)"
    return line_trace((picked + 1).tolist(), saturated, name, color) | {
        "hovertemplate": "step %{x}: %{y:.3g}% saturated<extra></extra>"
    }


def _meter_curves(run: RunCurves) -> list[np.ndarray]:
    """Every share the meter draws of ``run``."""
    curves = [run.lost_share(name) for name in ("pure", "mixed")]
    curves += [run.flushed_share(name) for name in ("pure", "mixed")]
    return curves + ([run.mixed_saturated_share] if run.saturates else [])


def lost_update_figure(dynamics: Run, pins: Sequence[RunCurves] = ()) -> Figure:
    """The lost-update meter: per step, the share of parameter entries whose update was rounded
    away (pure vs masters) and, dotted, whose gradient had flushed to zero.

    A pin draws each of these curves that differs from the current run's, in its colour. The
    y axis fits the shares, which a 0-100% axis would draw flat on the floor (they are often
    below 1%): from a little below 0, so a run that loses nothing draws above the x axis, to a
    little above the largest share, pins included; 0-1% when nothing is lost.
    """
    current = as_curves(dynamics)
    flushed = _flushed_traces(current)
    data = _meter_traces(current, OVERFLOW_COLOR, MIXED_COLOR) + flushed
    if current.saturates:
        data.append(_saturated_trace(current, FLOAT32_COLOR))
    lost = LOST_MEANING[current.pure_rounding]
    if flushed or any(pin.flushed_share(run).any() for pin in pins for run in ("pure", "mixed")):
        lost += "; dotted: updates that were 0 because their gradient flushed to 0"
    layout = base_layout(f"Lost-update meter<br><sup>{lost}</sup>", "step", "share of entries")

    def pinned(pin: RunCurves, color: str) -> list[Figure]:
        def differs(shares) -> list[str]:
            return [
                name
                for name in ("pure", "mixed")
                if not same_curve(shares(pin, name), shares(current, name))
            ]

        runs = differs(RunCurves.lost_share)
        traces = _meter_traces(pin, color, color, runs, PIN_POINTS)
        for trace, name in zip(traces, runs, strict=True):
            trace["line"]["dash"] = PIN_DASHES[name]
        colors = {"pure": color, "mixed": color}
        traces += _flushed_traces(pin, colors, differs(RunCurves.flushed_share), PIN_POINTS)
        if pin.saturates and not same_curve(
            pin.mixed_saturated_share, current.mixed_saturated_share
        ):
            traces.append(_saturated_trace(pin, color, PIN_POINTS))
        return traces

    data = overlay(current, pins, data, pinned, layout)
    shares = 100 * np.concatenate([c for run in (current, *pins) for c in _meter_curves(run)])
    shares = shares[np.isfinite(shares)]
    top = float(shares.max()) if shares.size and shares.max() > 0 else 1.0
    layout["yaxis"].update(range=[-0.05 * top, 1.08 * top], ticksuffix="%")
    return {"data": data, "layout": layout}


def _scale_trace(run: RunCurves, color: str, name: str = "log2 loss scale") -> Figure:
    picked = subsample(run.steps)
    return line_trace(
        (picked + 1).tolist(),  # the scale step k used, at the step it produced
        np.log2(run.mixed_scale[picked]),
        name,
        color,
        line={"color": color, "width": 2, "shape": "hv"},
    )


def scale_figure(dynamics: Run, pins: Sequence[RunCurves] = ()) -> Figure:
    """The loss scale over the steps (log2), skipped steps marked with crosses."""
    current = as_curves(dynamics)
    skipped = np.flatnonzero(current.mixed_skipped)[:MAX_POINTS]
    data = [
        _scale_trace(current, MIXED_COLOR),
        {
            "type": "scatter",
            "mode": "markers",
            "x": (skipped + 1).tolist(),
            "y": np.log2(current.mixed_scale[skipped]).tolist(),
            "name": f"skipped update ({int(current.mixed_skipped.sum())})",
            "marker": {"symbol": "x", "size": 9, "color": OVERFLOW_COLOR},
            "hovertemplate": "step %{x} skipped at S = 2^%{y}<extra></extra>",
        },
    ]
    title = f"Loss scale over the steps ({current.mode} scaling, mixed run)"
    layout = base_layout(title, "step", "log2 S")
    layout["showlegend"] = True  # keep the skipped-update entry visible even when it is empty

    def pinned(pin: RunCurves, color: str) -> list[Figure]:
        if same_curve(pin.mixed_scale, current.mixed_scale):
            return []
        return [_scale_trace(pin, color, f"log2 loss scale ({pin.mode})")]

    data = overlay(current, pins, data, pinned, layout)
    return {"data": data, "layout": layout}


DYNAMICS_FIGURES = (dynamics_loss_figure, lost_update_figure, scale_figure)
