"""The Compare recipes section in headless Chromium at 1400 x 1000: the tab bar still fits one
row, and its button fills the table (a row per registered recipe), the sentences (naming as the
closest the recipe whose gradient error in the table is smallest) and the small multiples (a
panel per recipe). The screenshot lands
in tests/artifacts/compare_section.png."""

from __future__ import annotations

import pytest
from test_browser import ARTIFACTS, TIMEOUT_MS
from test_tensors_browser import TAB_ROWS

from helpers import open_page
from playground.core.recipes.registry import RECIPES
from playground.sections.compare.summary import ROW_HEADER
from playground.sections.compare.tab import LABEL

pytestmark = pytest.mark.slow

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
TRACES = """() => {
  const chart = document.querySelector('#compare-plot .js-plotly-plot');
  return chart && chart.data ? chart.data.map(trace => trace.name) : null;
}"""


def test_the_button_fills_the_table_sentences_and_figure(browser, app_url):
    query = "&".join(f"{name}={value}" for name, value in SMALL.items())
    page = open_page(browser, f"{app_url}?{query}", 1400, 1000)
    try:
        assert page.evaluate(TAB_ROWS) == 1, "the tab bar wraps at 1400 px"
        page.locator("#compare").get_by_text(LABEL).first.click()
        page.locator("#compare-run").click()
        table = page.locator("#compare-table table")
        table.wait_for(timeout=3 * TIMEOUT_MS)
        rows = [row.split("\t") for row in table.locator("tbody tr").all_inner_texts()]
        assert [row[0].strip() for row in rows] == list(RECIPES)
        column = [name.strip() for name in ROW_HEADER.strip("|").split("|")].index("gradient error")
        errors = {row[0].strip(): float(row[column]) for row in rows}
        closest = min(errors, key=errors.get)
        page.locator("#compare-reading").get_by_text(f"Here {closest} is closest").wait_for()
        page.wait_for_function(f"() => ({TRACES})() !== null")
        assert page.evaluate(TRACES) == list(RECIPES)
        page.locator("#compare-plot").scroll_into_view_if_needed()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "compare_section.png"))
    finally:
        page.close()
