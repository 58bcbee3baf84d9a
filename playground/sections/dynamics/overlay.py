"""What the dynamics charts draw beside a run's own curves: pinned runs and where curves end.

Rule: ``overlay`` groups the current run's traces under ``this run: <what differs>`` and adds
each pin's traces (drawn by the chart's own function, in the pin's colour) under
``pinned: <what differs>``; a pin with nothing of its own to draw keeps a legend entry. The
legend goes below the plot, where many entries fit. ``nan_traces`` ends each curve that stops
being finite with a marker naming the step and the cause (``nan_marks``); ends at the same step
within 10% share one marker, a text line each.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from playground.sections.dynamics.curves import RunCurves
from playground.sections.dynamics.nan_marks import nan_marks
from playground.sections.dynamics.pins import PIN_COLORS, names
from playground.views.plotly import LEGEND_BELOW, WARNING_TEXT_COLOR, Figure

SAME_CURVES = "same curves as this run"


def _legend_only(name: str, color: str) -> Figure:
    """A legend entry with nothing to draw."""
    return {
        "type": "scatter",
        "mode": "lines",
        "x": [None],
        "y": [None],
        "name": name,
        "line": {"color": color, "width": 2},
        "showlegend": True,
        "hoverinfo": "skip",
    }


def _grouped(traces: list[Figure], group: str, title: str) -> list[Figure]:
    """``traces`` in one legend group titled ``title``."""
    return [trace | {"legendgroup": group, "legendgrouptitle": {"text": title}} for trace in traces]


def overlay(
    current: RunCurves,
    pins: Sequence[RunCurves],
    own: list[Figure],
    pinned_traces: Callable[[RunCurves, str], list[Figure]],
    layout: Figure,
) -> list[Figure]:
    """The current run's ``own`` traces, then each pin's (``pinned_traces(pin, color)``), each
    group titled by what differs; the legend moves below the plot, where many entries fit."""
    if not pins:
        return own
    current_name, pin_names = names(current, pins)
    data = _grouped(own, "current", f"this run: {current_name}")
    for index, (pin, name) in enumerate(zip(pins, pin_names, strict=True)):
        color = PIN_COLORS[index % len(PIN_COLORS)]
        # A pin whose every curve here is the current run's still names itself in the legend.
        traces = pinned_traces(pin, color) or [_legend_only(SAME_CURVES, color)]
        data += _grouped(traces, f"pin{index}", f"pinned: {name}")
    layout["legend"] = LEGEND_BELOW | {"groupclick": "toggleitem"}
    return data


def nan_traces(run: RunCurves, color_of: dict[str, str]) -> list[Figure]:
    """A marker where each drawn curve stops being finite, naming the step and the cause; curves
    that stop at the same point share one marker, a line of its text each."""
    ends: dict[tuple[int, float], list] = {}
    for mark in nan_marks(run):
        if mark.run not in color_of or mark.last_finite is None or mark.last_finite <= 0:
            continue  # no curve drawn, or no point on a log axis to end it at
        # Within 10% at the same step, two ends would print their texts over each other.
        near = [
            end
            for end in ends
            if end[0] == mark.step and abs(math.log10(end[1] / mark.last_finite)) < 0.04
        ]
        ends.setdefault(near[0] if near else (mark.step, mark.last_finite), []).append(mark)
    traces = []
    for (step, last), marks in ends.items():
        shared = len(marks) > 1
        lines = [f"{m.run}: {m.label}" if shared else m.label for m in marks]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers+text",
                "x": [step],
                "y": [last],
                "text": ["<br>".join(lines)],
                # Below the point: a curve about to fail is high on the chart, often at its top.
                "textposition": "bottom left" if step > run.steps / 2 else "bottom right",
                "cliponaxis": False,
                "textfont": {"color": WARNING_TEXT_COLOR, "size": 11},
                "name": f"{', '.join(m.run for m in marks)}: {marks[0].word} at step {step}",
                "marker": {"symbol": "x", "size": 11, "color": color_of[marks[0].run]},
                "hovertemplate": "<br>".join(m.sentence for m in marks) + "<extra></extra>",
            }
        )
    return traces
