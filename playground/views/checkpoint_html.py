"""The ``inspect`` record as ONE self-contained HTML page: opens offline, anywhere.

Rule::

    page      a title, the tensors to keep in high precision for each recipe (a table, at most
              SHOWN names a list) and under any of them, then two heatmaps (tensor x recipe):
              underflow (share of entries) and log10 rel_error; one row per floating-point
              tensor, in the checkpoint's order
    plotly.js embedded inline once (the first figure's ``to_html(include_plotlyjs=True)``);
              the second figure reuses it, so the file needs no network
"""

from __future__ import annotations

import html
import math
from typing import Any

import plotly.graph_objects as go

from playground.core.tensors.recipe_stats import RECIPES
from playground.views.plotly import CHART_BACKGROUND, TEXT_COLOR

ROW_HEIGHT = 18


SHOWN = 40  # names listed per list; the JSON has every one


def _matrix(record: dict[str, Any], statistic: str, log: bool) -> tuple[list[str], list]:
    names, rows = [], []
    for tensor in record["tensors"]:
        if not tensor["recipes"]:
            continue
        names.append(tensor["name"])
        row = []
        for recipe in RECIPES:
            value = tensor["recipes"][recipe][statistic]
            if log:
                value = math.log10(value) if value else None
            row.append(value)
        rows.append(row)
    return names, rows


def _heatmap(record: dict[str, Any], statistic: str, title: str, log: bool) -> go.Figure:
    names, rows = _matrix(record, statistic, log)
    figure = go.Figure(
        go.Heatmap(
            z=rows,
            x=list(RECIPES),
            y=names,
            colorscale="Viridis",
            colorbar={"title": "log10" if log else "share"},
            hovertemplate="%{y}<br>%{x}: %{z:.3g}<extra></extra>",
        )
    )
    figure.update_layout(
        title=title,
        height=max(300, 120 + ROW_HEIGHT * len(names)),
        paper_bgcolor=CHART_BACKGROUND,
        plot_bgcolor=CHART_BACKGROUND,
        font={"color": TEXT_COLOR},
        yaxis={"autorange": "reversed", "automargin": True},
    )
    return figure


def checkpoint_html(
    record: dict[str, Any], title: str, kept_by_recipe: dict[str, list[str]] | None = None
) -> str:
    """The page of an ``inspect`` record (see the module rule); ``kept_by_recipe``: each
    recipe's own keep-high-precision list (``inspection.kept_by_recipe``), if given."""
    underflow = _heatmap(record, "underflow", "Underflow: nonzero entries stored as 0", False)
    error = _heatmap(record, "rel_error", "Relative error ||q - x|| / ||x|| (log10)", True)
    kept = record["keep_high_precision"]
    items = "".join(f"<li><code>{html.escape(name)}</code></li>" for name in kept[:SHOWN])
    items += f"<li>and {len(kept) - SHOWN} more</li>" if len(kept) > SHOWN else ""
    rows = "".join(
        f"<tr><td>{html.escape(recipe)}</td><td>{len(names)}</td><td>"
        + ", ".join(f"<code>{html.escape(name)}</code>" for name in names[:SHOWN])
        + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
        + "</td></tr>"
        for recipe, names in (kept_by_recipe or {}).items()
    )
    table = (
        "<h2>Keep in high precision, by the recipe you train with</h2><table>"
        "<tr><th>recipe</th><th>tensors</th><th>which</th></tr>" + rows + "</table>"
        if rows
        else ""
    )
    speed = record.get("values_per_second")
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title></head>"
        f"<body style='font-family:sans-serif;color:{TEXT_COLOR}'>"
        f"<h1>{html.escape(title)}</h1>"
        f"<p>{len(record['tensors'])} tensors"
        + (f", {speed / 1e6:.1f} M values/s" if speed else "")
        + f".</p>{table}<h2>Keep in high precision under any FP8 or FP4 recipe ({len(kept)})"
        f"</h2><ul>{items}</ul>"
        + underflow.to_html(include_plotlyjs=True, full_html=False)
        + error.to_html(include_plotlyjs=False, full_html=False)
        + "</body></html>"
    )
