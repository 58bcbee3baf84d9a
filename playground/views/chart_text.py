"""A chart's text alternative: its title and the key numbers of its data, in words.

Rule: ``describe(figure)`` reads only the figure dict, so it says what the chart draws:

    the title (markup removed), then the axis titles;
    per trace but guides (no hover), its name and
      bars             how many, their total and the tallest (height and place);
      lines            how many finite points, the range of y and the last finite point;
      markers          how many finite points and the ranges of x and y (with a category
                       axis: each point, "x (y)");
      heatmaps         the grid, the range of its finite cells and where the largest is
                       (at x0 + column dx, y0 + row dy, as the map places it);
    the annotations' text (a note such as "no finite points: ..." is part of the message).

``with_description(figure)`` returns the figure with that text as ``layout.meta.description``;
the page's script makes it the chart's accessible name (a screen reader's "figure, ...").
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

Figure = dict[str, Any]
MAX_TRACES = 8  # described one by one; more are counted


def plain(text: Any) -> str:
    """Plotly's markup as plain text: tags become spaces, entities characters."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", str(text)))).strip()


def number(value: Any) -> str:
    """A value as the description writes it: numbers with 4 significant digits."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return plain(value)
    return f"{value:,}" if isinstance(value, int) else f"{value:.4g}"


def _title(layout: dict[str, Any], key: str) -> str:
    title = layout.get(key, {}).get("title", "")
    return plain(title.get("text", "") if isinstance(title, dict) else title)


def _finite(values: list[Any]) -> list[tuple[int, float]]:
    return [
        (index, float(v))
        for index, v in enumerate(values)
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]


def _heatmap(name: str, trace: dict[str, Any]) -> str:
    rows = list(trace.get("z", []))
    grid = f"{len(rows):,} x {max(map(len, rows), default=0):,} map"
    cells = [(r, c, v) for r, row in enumerate(rows) for c, v in _finite(list(row))]
    if not cells:
        return f"{name}: a {grid} with no finite values"
    low = min(v for *_, v in cells)
    row, column, high = max(cells, key=lambda cell: cell[2])
    x = trace.get("x0", 0) + column * trace.get("dx", 1)
    y = trace.get("y0", 0) + row * trace.get("dy", 1)
    return (
        f"{name}: a {grid}, values from {number(low)} to {number(high)}, the largest at "
        f"x {number(x)}, y {number(y)}"
    )


def _trace(trace: dict[str, Any]) -> str:
    name = plain(trace.get("name", "")) or "unnamed"
    if trace.get("type") == "heatmap":
        return _heatmap(name, trace)
    x, y = list(trace.get("x", [])), list(trace.get("y", []))
    if any(values and all(isinstance(v, str) for v in values) for values in (x, y)):
        # A category axis: each point by its place
        places = [f"{number(a)} ({number(b)})" for a, b in zip(x, y, strict=False)]
        return f"{name}: " + ", ".join(places)
    points = _finite(y)
    if not points:
        return f"{name}: no finite values"
    if trace.get("type") == "bar":
        at, tallest = max(points, key=lambda point: point[1])
        total = sum(value for _, value in points)
        place = f" at {number(x[at])}" if at < len(x) else ""
        count = f"{round(total):,}" if all(v.is_integer() for _, v in points) else number(total)
        return (
            f"{name}: {len(points):,} bars totalling {count}, the tallest {number(tallest)}{place}"
        )
    low, high = min(v for _, v in points), max(v for _, v in points)
    if trace.get("mode") == "markers":  # a cloud: where it lies
        xs = [v for _, v in _finite([x[i] for i, _ in points if i < len(x)])]
        across = f"x from {number(min(xs))} to {number(max(xs))}, " if xs else ""
        return f"{name}: {len(points):,} points, {across}y from {number(low)} to {number(high)}"
    last, value = points[-1]
    place = f"{number(x[last])}, " if last < len(x) else ""
    return (
        f"{name}: {len(points):,} points, y from {number(low)} to {number(high)}, "
        f"the last at ({place}{number(value)})"
    )


def describe(figure: Figure) -> str:
    """The figure's text alternative (see the module rule)."""
    layout = figure.get("layout", {})
    parts = [f"Chart: {_title({'chart': layout}, 'chart') or 'untitled'}."]
    axes = [f"{key[0]} axis: {_title(layout, key)}" for key in ("xaxis", "yaxis")]
    axes = [text for text in axes if not text.endswith(": ")]
    if axes:
        parts.append("; ".join(axes) + ".")
    # A guide (the y = x line, say) takes no hover and is no data.
    traces = [trace for trace in figure.get("data", []) if trace.get("hoverinfo") != "skip"]
    parts += [_trace(trace) + "." for trace in traces[:MAX_TRACES]]
    if len(traces) > MAX_TRACES:
        parts.append(f"{len(traces) - MAX_TRACES} more series.")
    notes = [plain(note.get("text", "")) for note in layout.get("annotations", [])]
    if any(notes):
        parts.append("Notes: " + "; ".join(note for note in notes if note) + ".")
    return " ".join(parts)


def with_description(figure: Figure) -> Figure:
    """``figure`` with its text alternative as ``layout.meta.description`` (a new dict)."""
    layout = figure.get("layout", {})
    meta = {**layout.get("meta", {}), "description": describe(figure)}
    return {**figure, "layout": {**layout, "meta": meta}}
