"""Every figure as Plotly.js draws it in Chromium: tick labels, band labels, fitted axes.

The figures are drawn with the plotly.js that ships with the plotly package, as gr.Plot draws
them (the dict as is, responsive), at a desktop's plot width and, where labels could collide,
at a phone's.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import plotly
import pytest
from app_figures import all_figures

pytestmark = pytest.mark.slow

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
DESKTOP, PHONE = 1100, 330  # px: a desktop's chart width and a phone's
# Every chart is drawn at a desktop's width for the settings whose numbers are the hardest to
# label (tiny, non-finite, float8), and the charts whose labels could collide, for every
# setting, at a phone's width too.
EVERY_CHART_FOR = ("float16 underflow", "float16 overflow", "float16 dynamic", "float8")
NARROW = ("loss_figure", "magnitude_histogram")
# A tick label with an SI suffix: 20n, 1.5k, 500µ, 2M ...
SI_TICK = re.compile(r"^[−-]?\d+(\.\d+)?[yzafpnµumkMGTPEZY]$")
DRAW_JS = """
async ([figure, width]) => {
  const chart = document.getElementById('chart');
  chart.style.width = width + 'px';
  chart.style.height = (figure.layout.height || 450) + 'px';
  await Plotly.newPlot(chart, figure.data, figure.layout, {responsive: true});
  const box = e => { const r = e.getBoundingClientRect();
    return {text: e.textContent, left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const full = chart._fullLayout;
  return {
    ticks: Array.from(chart.querySelectorAll('.xtick text, .ytick text')).map(t => t.textContent),
    notes: Array.from(chart.querySelectorAll('.annotation-text')).map(box),
    title: Array.from(chart.querySelectorAll('.gtitle')).map(box),
    yrange: full.yaxis.range,
  };
}
"""


@pytest.fixture(scope="module")
def page(browser):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    page.set_content("<html><body style='margin:0'><div id='chart'></div></body></html>")
    page.add_script_tag(path=str(PLOTLY_JS))
    yield page
    page.close()


@pytest.fixture(scope="module")
def drawn(page) -> dict[tuple[str, int], dict]:
    wanted = [
        (name, width)
        for name in all_figures()
        for width in (DESKTOP, PHONE)
        if name.endswith(NARROW) or (width == DESKTOP and name.startswith(EVERY_CHART_FOR))
    ]
    return {key: page.evaluate(DRAW_JS, [all_figures()[key[0]], key[1]]) for key in wanted}


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and (b["top"] < a["bottom"])
    )


def test_no_tick_label_has_an_si_suffix(drawn):
    kinds = {name.split(": ")[1] for name, _ in drawn}
    assert len(kinds) == 11  # every chart of the app (tests/views/test_plotly.py lists them)
    for (name, width), chart in drawn.items():
        assert chart["ticks"] or not all_figures()[name]["data"], (name, width)
        suffixed = [tick for tick in chart["ticks"] if SI_TICK.match(tick)]
        assert not suffixed, (name, width, suffixed)


def test_band_labels_overlap_neither_each_other_nor_the_title(drawn):
    magnitude = {key: chart for key, chart in drawn.items() if "magnitude_histogram" in key[0]}
    assert magnitude
    for key, chart in magnitude.items():
        assert len(chart["notes"]) == 4, key
        for one, other in itertools.combinations(chart["notes"] + chart["title"], 2):
            assert not _overlap(one, other), (key, one, other)


def test_lost_update_axis_is_fitted_to_the_shares(drawn):
    figures = all_figures()
    for (name, width), chart in drawn.items():
        if "lost_update_figure" not in name:
            continue
        largest = max(y for trace in figures[name]["data"] for y in trace["y"])
        top = largest or 1.0  # nothing lost: a 0-1% axis
        low, high = chart["yrange"]
        assert low < 0 < top < high <= 1.1 * top, (name, width, low, high)


def test_loss_axis_is_drawn_zoomed_to_the_losses(drawn):
    figures = all_figures()
    for (name, width), chart in drawn.items():
        if not name.endswith("loss_figure") or name.startswith(("float16 ", "dynamics")):
            continue
        losses = [y for trace in figures[name]["data"][:2] for y in trace["y"]]
        low, high = chart["yrange"]
        assert 0 < low < min(losses) and max(losses) < high, (name, width)
