"""The Compare recipes section in headless Chromium at 1400 x 1000: the tab bar still fits one
row, and its button fills the table (a row per registered recipe), the sentences (naming as the
closest the recipe whose gradient error in the table is smallest) and the small multiples (a
panel per recipe). The screenshot lands
in tests/artifacts/compare_section.png. Its transformer panel: a pasted or uploaded config.json
fills the fields and redraws the stacked bars (a bar per recipe) and the table, which fits its
column at 1400 px (tests/artifacts/architecture_memory.png)."""

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


GPT2 = '{"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}'
LLAMA = (
    '{"hidden_size": 2048, "num_hidden_layers": 16, "num_attention_heads": 32, '
    '"num_key_value_heads": 8, "intermediate_size": 8192, "vocab_size": 128256, '
    '"tie_word_embeddings": true}'
)
BARS = """() => {
  const chart = document.querySelector('#architecture-plot .js-plotly-plot');
  return chart && chart.data ? chart.data.map(trace => trace.x) : null;
}"""
# How far the table runs past its box (0: it fits; more: it scrolls or is cut).
OVERRUN = """() => {
  const table = document.querySelector('#architecture-memory table');
  return table.scrollWidth - table.clientWidth;
}"""


def test_a_pasted_or_uploaded_config_json_fills_the_fields_and_redraws_the_bars(
    browser, app_url, tmp_path
):
    page = open_page(browser, app_url, 1400, 1000)
    try:
        page.locator("#compare").get_by_text(LABEL).first.click()
        paste = page.locator("#config-json-paste textarea")
        paste.fill(GPT2)
        paste.blur()
        page.locator("#hidden_size input").first.wait_for()
        page.wait_for_function("() => document.querySelector('#hidden_size input').value === '768'")
        page.locator("#architecture-memory").get_by_text("124,439,808 parameters").wait_for(
            timeout=3 * TIMEOUT_MS
        )
        page.wait_for_function(f"() => ({BARS})() !== null")
        assert page.evaluate(BARS) == [list(RECIPES)] * 7  # seven parts, a bar per recipe
        heads = page.locator("#architecture-memory table thead th").all_inner_texts()
        assert [head.strip() for head in heads[1:]] == list(RECIPES)  # a column per recipe
        assert page.evaluate(OVERRUN) <= 1, "the memory table does not fit at 1400 px"
        page.locator("#architecture-plot").scroll_into_view_if_needed()
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "architecture_memory.png"), full_page=False)
        # an uploaded config.json is read the same way: its text in the box, its fields set
        llama = tmp_path / "config.json"
        llama.write_text(LLAMA)
        page.locator("#config-json-file input[type=file]").set_input_files(str(llama))
        page.locator("#architecture-memory").get_by_text("1,235,814,400 parameters").wait_for(
            timeout=3 * TIMEOUT_MS
        )
        assert page.locator("#hidden_size input").first.input_value() == "2048"
        assert '"num_key_value_heads": 8' in paste.input_value()
    finally:
        page.close()
