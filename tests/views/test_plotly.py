"""Every figure the app draws: exponent notation, readable text in both themes, small payloads.

Gradio's gr.Plot draws a Plotly figure as it is, whatever the page theme; these tests read the
figure dicts themselves (tests/views/test_plotly_browser.py checks them as drawn).
"""

from __future__ import annotations

import colorsys
import json
import re

import plotly.graph_objects as go
import pytest
from app_figures import all_figures, figure_names

from helpers import contrast
from playground.views.plotly import BAND_COLORS, band, label_rows

# Plotly's exponentformat values that write no SI suffix; its default, "B", writes 20n for 2e-8.
NOT_SI = {"e", "E", "power", "none"}
AXIS_KEY = re.compile(r"^[xy]axis\d*$")
# A d3 number format of type "s" (SI prefix) inside a hover template or a tick format.
SI_FORMAT = re.compile(r"%\{[^}]*:[^}]*s\}")
# The page behind a chart: Gradio's light block (white) and dark block (gray-800, measured in
# Chromium with ?__theme=dark: rgb(31, 41, 55)).
PAGE_BACKGROUNDS = {"light": (255, 255, 255, 1.0), "dark": (31, 41, 55, 1.0)}
MIN_CONTRAST = 4.5  # WCAG AA for text
MAX_BYTES = 200_000


def _rgba(color: str) -> tuple[float, float, float, float]:
    """'#rrggbb', 'rgb(r, g, b)' or 'rgba(r, g, b, a)' as (r, g, b, a)."""
    if color.startswith("#"):
        return (*(int(color[i : i + 2], 16) for i in (1, 3, 5)), 1.0)
    parts = [float(p) for p in color[color.index("(") + 1 : -1].split(",")]
    return (*parts[:3], parts[3] if len(parts) == 4 else 1.0)


def _over(top: tuple, bottom: tuple) -> tuple:
    """``top`` composited over the opaque ``bottom``."""
    alpha = top[3]
    return (*(alpha * t + (1 - alpha) * b for t, b in zip(top[:3], bottom[:3], strict=True)), 1.0)


def _text_colors(node, path="") -> list[tuple[str, str]]:
    """(where, colour) of every font colour set anywhere in a figure dict."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}"
            if key.endswith("font") and isinstance(value, dict) and "color" in value:
                found.append((where, value["color"]))
            found += _text_colors(value, where)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += _text_colors(value, f"{path}[{index}]")
    return found


NAMES = figure_names()


@pytest.fixture(scope="module")
def figures() -> dict[str, dict]:
    """Every figure, computed once, when the first test here runs (not at collection)."""
    return all_figures()


def test_the_names_are_the_figures(figures):
    assert list(figures) == NAMES


def test_the_walk_covers_every_chart_of_the_app():
    kinds = {name.split(": ")[1] for name in NAMES}
    assert {
        "loss_figure",
        "gradient_histograms",
        "gradient_scatter",
        "relative_error_histogram",
        "update_size_histogram",
        "magnitude_histogram",
        "activation_histogram",
        "sweep_figure",
        "dynamics_loss_figure",
        "lost_update_figure",
        "scale_figure",
    } <= kinds


@pytest.mark.parametrize("name", NAMES)
def test_every_axis_writes_exponents_not_si_suffixes(name, figures):
    figure = figures[name]
    layout = figure["layout"]
    axes = {key: value for key, value in layout.items() if AXIS_KEY.match(key)}
    assert axes, name
    for key, spec in axes.items():
        assert spec.get("exponentformat") in NOT_SI, (name, key)  # Plotly's default is SI
        assert not spec.get("tickformat", "").rstrip().endswith("s"), (name, key)
    for trace in figure["data"]:
        for key in ("hovertemplate", "texttemplate"):
            assert not SI_FORMAT.search(trace.get(key, "")), (name, trace.get(key))


@pytest.mark.parametrize("name", NAMES)
def test_every_text_reads_on_the_chart_in_both_themes(name, figures):
    figure = figures[name]
    layout = figure["layout"]
    paper, plot = _rgba(layout["paper_bgcolor"]), _rgba(layout["plot_bgcolor"])
    # Opaque: the chart's background is its own, whichever theme the page is in.
    assert paper[3] == 1.0 and plot[3] == 1.0, name
    colors = _text_colors(figure)
    assert (".layout.font", layout["font"]["color"]) in colors  # every text inherits one
    for theme, page in PAGE_BACKGROUNDS.items():
        for background in (_over(paper, page), _over(plot, _over(paper, page))):
            for where, color in colors:
                ratio = contrast(_over(_rgba(color), background), background)
                assert ratio >= MIN_CONTRAST, (name, theme, where, color, round(ratio, 2))
    # No text drawn on a bar's own colour: bar labels sit outside their bars.
    for trace in figure["data"]:
        if trace.get("type") == "bar" and "text" in trace:
            assert trace.get("textposition") == "outside", name


@pytest.mark.parametrize("name", NAMES)
def test_every_figure_is_valid_strict_json(name, figures):
    figure = figures[name]
    go.Figure(figure)  # raises on any unknown or mistyped property
    assert len(json.dumps(figure, allow_nan=False)) < MAX_BYTES


def test_label_rows_stack_only_labels_that_would_collide():
    # Two long labels centred 1% of the axis apart collide; one far away stays on row 0.
    texts = ["subnormal, flushed here", "flushed to 0", "normal"]
    rows = label_rows([10.0, 11.0, 60.0], texts, 100)
    assert rows[2] == 0 and sorted(rows[:2]) == [0, 1]
    assert label_rows([5.0, 50.0, 95.0], ["a", "b", "c"], 100) == [0, 0, 0]


def test_each_band_label_is_written_in_its_own_bands_hue():
    # Two narrow neighbours' labels stack (bfloat16's flushed and flushed-subnormal bands): each
    # label's text is coloured like its band's fill, and no two neighbours share one.
    def hue(color: str) -> float:  # "rgba(r, g, b, a)" or "#rrggbb", in degrees
        if color.startswith("rgb"):
            rgb = [int(c) / 255 for c in re.findall(r"\d+", color)[:3]]
        else:
            rgb = [int(color[i : i + 2], 16) / 255 for i in (1, 3, 5)]
        return colorsys.rgb_to_hsv(*rgb)[0] * 360

    order = ["flushed to 0", "subnormal, flushed here", "normal", "overflow"]
    notes = {label: band(0, 1, label)[1] for label in BAND_COLORS}
    for label, note in notes.items():
        fill, text = hue(BAND_COLORS[label]), hue(note["font"]["color"])
        assert min(abs(fill - text), 360 - abs(fill - text)) < 30, (label, fill, text)
    for left, right in zip(order, order[1:], strict=False):
        assert notes[left]["font"]["color"] != notes[right]["font"]["color"], (left, right)
