"""The page at its teaching moments, in real headless Chromium at 1400 x 1000, on a phone
(390 x 844) and in the dark theme: the magnitude axis keeps its labels level with its "zeros"
and "inf/NaN" ticks drawn, the losses table shows every digit of its "new" column, the caption
under the magnitude figure never asks for the dtype already chosen, and a block recipe's
counts are its blocks'. Screenshots go to tests/artifacts/teaching/."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from test_browser import ARTIFACTS, TIMEOUT_MS

from playground import StepConfig, run_report
from playground.core.settings.settings import defaults
from playground.sections.lab.tab import magnitude_table

pytestmark = pytest.mark.slow

SHOTS = ARTIFACTS / "teaching"
SIZES = {"desktop": (1400, 1000), "phone": (390, 844)}
# The one-step views the issue names: S past float16's range, and S = 1, whose small gradients
# the text sends the reader to look at; and the training story's batch, whose losses are
# ~5e-07 (the widest numbers the losses table holds).
VIEWS = {
    "float16_S65536": {"compute_dtype": "float16", "loss_scale": 65536},
    "float16_S1": {"compute_dtype": "float16", "loss_scale": 1},
    "tiny_losses": {
        "n": 4096,
        "d_in": 8,
        "d_out": 16,
        "lr": 2,
        "target_scale": 2.0**-16,
        "compute_dtype": "float16",
        "loss_scale": 1,
    },
}

# The magnitude figure's x tick labels as drawn: text, box, and whether any is turned.
TICKS_JS = """
() => {
  const chart = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
    g => g.layout && String(g.layout.title.text).includes('Gradient magnitudes against'));
  if (!chart) return null;
  const box = chart.getBoundingClientRect();
  const ticks = Array.from(chart.querySelectorAll('.xtick text')).map(t => {
    const r = t.getBoundingClientRect();
    return {text: t.textContent, left: r.left, right: r.right,
            turned: /rotate/.test(t.getAttribute('transform') || '')};
  });
  return {ticks, left: box.left, right: box.right};
}
"""
# Every cell of the losses table against its own box, and the table against its column.
TABLE_JS = """
() => {
  const table = document.querySelector('#headline table');
  const cells = Array.from(table.querySelectorAll('td, th')).map(c => ({
    text: c.innerText, scroll: c.scrollWidth, client: c.clientWidth}));
  const box = table.getBoundingClientRect(), column = table.parentElement.getBoundingClientRect();
  return {scroll: table.scrollWidth, client: table.clientWidth, cells,
          right: box.right, columnRight: column.right};
}
"""


def _open(browser, app_url: str, size: tuple[int, int], settings: dict, dark: bool = False):
    page = browser.new_page(viewport={"width": size[0], "height": size[1]})
    page.set_default_timeout(TIMEOUT_MS)
    query = urlencode(settings | ({"__theme": "dark"} if dark else {}))
    page.goto(f"{app_url}?{query}")
    expected = run_report(StepConfig(**(defaults() | settings))).mixed_new_loss
    page.wait_for_function(
        "text => document.querySelector('#headline #mixed-new-loss')?.textContent === text",
        arg=f"{expected:.7g}",
    )
    page.wait_for_function(f"() => ({TICKS_JS})() !== null")
    page.wait_for_timeout(500)  # the figure's last layout pass
    return page


def _level_and_apart(ticks: dict) -> None:
    texts = [tick["text"] for tick in ticks["ticks"]]
    assert texts[0] == "zeros" and texts[-1] == "inf/NaN", texts
    assert not any(tick["turned"] for tick in ticks["ticks"]), texts
    ordered = sorted(ticks["ticks"], key=lambda tick: tick["left"])
    for one, other in zip(ordered, ordered[1:], strict=False):
        assert one["right"] + 2 <= other["left"], (one, other)
    assert ticks["left"] <= ordered[0]["left"] and ordered[-1]["right"] <= ticks["right"]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("view", ["float16_S65536", "float16_S1"])
def test_the_magnitude_axis_keeps_level_labels_and_its_inf_nan_tick(browser, app_url, size, view):
    page = _open(browser, app_url, SIZES[size], VIEWS[view])
    try:
        _level_and_apart(page.evaluate(TICKS_JS))
        # float16 is chosen: the caption and counts never ask to switch to it.
        text = (
            page.locator("#magnitude-figure").inner_text()
            + page.locator("#magnitudes").inner_text()
        )
        assert "Switch the compute dtype to float16" not in text
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#magnitude-figure").screenshot(
            path=str(SHOTS / f"magnitudes_{view}_{size}.png")
        )
    finally:
        page.close()


@pytest.mark.parametrize("size", SIZES)
def test_the_losses_table_shows_every_digit_of_its_new_column(browser, app_url, size):
    page = _open(browser, app_url, SIZES[size], VIEWS["tiny_losses"])
    try:
        table = page.evaluate(TABLE_JS)
        assert any("e-0" in cell["text"] for cell in table["cells"]), table["cells"]
        assert table["scroll"] <= table["client"], table
        assert table["right"] <= table["columnRight"] + 0.5, table
        for cell in table["cells"]:
            assert cell["scroll"] <= cell["client"], cell
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.locator("#headline").screenshot(path=str(SHOTS / f"losses_table_{size}.png"))
        page.screenshot(path=str(SHOTS / f"page_tiny_losses_{size}.png"))
    finally:
        page.close()


def test_the_dark_theme_and_a_block_recipe_at_the_teaching_moments(browser, app_url):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = _open(browser, app_url, SIZES["desktop"], VIEWS["float16_S65536"], dark=True)
    try:
        _level_and_apart(page.evaluate(TICKS_JS))
        assert page.evaluate("() => document.body.classList.contains('dark')")
        page.screenshot(path=str(SHOTS / "page_float16_S65536_dark.png"))
    finally:
        page.close()
    settings = {"compute_dtype": "nvfp4"}
    page = _open(browser, app_url, SIZES["desktop"], settings, dark=True)
    try:
        _level_and_apart(page.evaluate(TICKS_JS))
        # The counts beside the figure are the report's own, its blocks' (not E2M1's raw range).
        report = run_report(StepConfig(**(defaults() | settings)))
        lost = report.magnitudes["before scaling"]["lost to zero"]
        assert f"({lost:,})" in page.locator("#magnitudes").inner_text()
        assert "stored in nvfp4's blocks" in magnitude_table(report)
        page.locator("#magnitude-figure").screenshot(path=str(SHOTS / "magnitudes_nvfp4_dark.png"))
        page.screenshot(path=str(SHOTS / "page_nvfp4_dark.png"))
    finally:
        page.close()
