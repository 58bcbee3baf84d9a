"""The controls that carry the lessons sit beside the result (issue 22), in real Chromium.

At 1400 x 1000 the compute dtype, learning rate, optimizer and loss scale are on one screen
beside the headline, each once, when the workspace below the route is scrolled to the top (the
first screen is the route's, issue 33); lr is reached from the page's start past the route's two
stops and the lessons' toolbar plus two (the compute-dtype radio group is one Tab stop, moved by
the arrow keys, which commit); on a 390 px phone those controls sit right above the headline;
no chart's legend overlaps its title. Screenshots at both sizes, light and dark, go to
tests/artifacts/.
"""

from __future__ import annotations

import pytest
from test_browser import ARTIFACTS, TIMEOUT_MS
from test_page_experience import BOX_JS, DESKTOP, PHONE, load_page, open_session

from browser_waits import wait_for_headline
from helpers import expected_headline
from playground.sections.step import tab as step_tab

pytestmark = pytest.mark.slow

KEY_CONTROLS = ("compute_dtype", "lr", "loss_scale", "optimizer")
MAX_PRESSES = 40
FEW_PRESSES = 8  # lr took 16 before the key controls moved up
# Each visible chart's title and legend boxes (the legend's entries, where it has any).
TITLE_AND_LEGEND = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(g => g.offsetParent !== null && g.querySelector('.gtitle'))
    .map(g => { const box = e => { const r = e.getBoundingClientRect();
            return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
        return {title: String(g.layout.title.text), box: box(g.querySelector('.gtitle')),
                legend: Array.from(g.querySelectorAll('.legend .traces')).map(box)}; })"""


def _sessions(browser, app_url: str, query: str):
    """A desktop and a phone page, loaded with the defaults."""
    sessions = {}
    for name, viewport in (("desktop", DESKTOP), ("phone", PHONE)):
        sessions[name] = open_session(browser, app_url, viewport)
        load_page(sessions[name], query)
    yield sessions
    for session in sessions.values():
        session.page.close()


@pytest.fixture(scope="module")
def light(browser, app_url):
    yield from _sessions(browser, app_url, "")


@pytest.fixture(scope="module")
def dark(browser, app_url):
    yield from _sessions(browser, app_url, "?__theme=dark")


def _box(page, selector: str) -> dict:
    box = page.evaluate(BOX_JS, selector)
    assert box is not None, selector
    return box


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_key_controls_sit_once_beside_the_headline_on_the_first_screen(request, theme):
    sessions = request.getfixturevalue(theme)
    page = sessions["desktop"].page
    page.evaluate("() => document.getElementById('workspace').scrollIntoView()")
    headline = _box(page, "#headline")
    for name in KEY_CONTROLS:
        assert page.evaluate("id => document.querySelectorAll(`#${id}`).length", name) == 1
        box = _box(page, f"#{name}")
        assert box["top"] >= 0 and box["bottom"] <= DESKTOP["height"], (name, box)
        assert box["right"] <= headline["left"], (name, box, headline)  # to its left, beside it
    # The column of key controls starts level with the headline.
    assert abs(_box(page, "#key-controls")["top"] - headline["top"]) < 40
    page.screenshot(path=str(ARTIFACTS / f"key_controls_1400x1000_{theme}.png"))
    page.evaluate("() => window.scrollTo(0, 0)")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_on_a_phone_the_key_controls_sit_right_above_the_headline(request, theme):
    sessions = request.getfixturevalue(theme)
    page = sessions["phone"].page
    keys, headline = _box(page, "#key-controls"), _box(page, "#headline")
    assert keys["bottom"] <= headline["top"] < keys["bottom"] + 60, (keys, headline)
    # The other settings follow the results.
    assert _box(page, "#more-controls")["top"] >= _box(page, "#results")["bottom"]
    assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    page.evaluate("id => document.getElementById(id).scrollIntoView()", "key-controls")
    page.screenshot(path=str(ARTIFACTS / f"key_controls_390x844_{theme}.png"))
    page.evaluate("() => window.scrollTo(0, 0)")


def _presses_to(page, elem_id: str) -> int:
    """Tab presses from the page's start until the focus is inside ``#elem_id``."""
    page.evaluate("() => { document.activeElement?.blur(); window.scrollTo(0, 0); }")
    page.locator("body").focus()
    for presses in range(1, MAX_PRESSES + 1):
        page.keyboard.press("Tab")
        if page.evaluate("id => !!document.activeElement?.closest(`#${id}`)", elem_id):
            return presses
    raise AssertionError(f"#{elem_id} not reached in {MAX_PRESSES} Tab presses")


def test_lr_is_two_tab_presses_past_the_routes_chapter_list(light):
    page = light["desktop"].page
    presses = _presses_to(page, "lr")
    # The glossary link, the route's start and its chapter list, the dtype group, lr (the
    # lessons' buttons sit under the results).
    assert presses == 5
    assert presses <= FEW_PRESSES, f"lr takes {presses} Tab presses"


def test_a_radio_group_is_one_tab_stop_whose_arrow_keys_commit(light):
    page = light["desktop"].page
    page.locator("#compute_dtype input:checked").focus()
    page.keyboard.press("Tab")
    assert page.evaluate("() => !!document.activeElement.closest('#lr')")
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("() => document.activeElement.closest('fieldset')?.id") == (
        "compute_dtype"
    )
    page.keyboard.press("ArrowRight")  # bfloat16 -> float16, committed like a click
    wait_for_headline(page, expected_headline(compute_dtype="float16"))
    page.wait_for_function(
        "() => location.search.includes('compute_dtype=float16')", timeout=TIMEOUT_MS
    )
    page.keyboard.press("ArrowLeft")
    wait_for_headline(page, expected_headline())


def _overlapping(charts: list[dict]) -> list:
    return [
        (chart["title"], chart["box"], item)
        for chart in charts
        for item in chart["legend"]
        if item["left"] < chart["box"]["right"]
        and chart["box"]["left"] < item["right"]
        and item["top"] < chart["box"]["bottom"]
        and chart["box"]["top"] < item["bottom"]
    ]


@pytest.mark.parametrize("size", ["desktop", "phone"])
def test_no_legend_overlaps_a_chart_title(light, size):
    page = light[size].page
    seen = []
    for tab, names in step_tab.TABS.items():
        page.locator("#sections").get_by_role("tab", name=tab, exact=True).click()
        # The tab's charts and the magnitude figure above the tabs, drawn with their titles.
        page.wait_for_function(
            f"n => ({TITLE_AND_LEGEND})().length >= n", arg=len(names) + 1, timeout=TIMEOUT_MS
        )
        page.wait_for_timeout(300)  # the figures' own layout pass
        charts = page.evaluate(TITLE_AND_LEGEND)
        seen += [chart["title"] for chart in charts]
        assert not _overlapping(charts), (tab, _overlapping(charts))
    page.locator("#sections").get_by_role("tab", name="Loss", exact=True).click()
    assert len(set(seen)) >= len(step_tab.FIGURES)
