"""The operations table in headless Chromium: a precision lesson button sets its settings
(written to the URL), runs once, fills ``#operations-table`` from its run and brings it into
view under its checked claim; a refused value then dims the table with the other results."""

from __future__ import annotations

from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect
from test_browser import ARTIFACTS, TIMEOUT_MS

from browser_waits import wait_for_headline, wait_in_view
from playground.core.lessons import lesson as lesson_by_id
from playground.core.lessons.precision import layernorm_overflow
from playground.core.settings.settings import StepConfig, defaults
from playground.core.step.report import run_report
from playground.ui.examples import LESSONS

pytestmark = pytest.mark.slow

RUN_TIMEOUT_MS = 3 * TIMEOUT_MS  # a lesson's first run compiles its programs
ROWS_JS = """() => [...document.querySelectorAll('#operations-table tbody tr')]
    .map(tr => [...tr.querySelectorAll('td')].map(td => td.innerText.trim()))"""
TEXT_JS = "() => (document.querySelector('#operations-table')?.innerText || '')"


def test_a_precision_lesson_fills_the_operations_table_and_it_dims_when_stale(browser, app_url):
    lesson = lesson_by_id("layernorm-overflow")
    assert lesson.claim_on is layernorm_overflow
    # The toolbar's order is the row's: how far the lesson sits from the last button.
    ids = [f"lesson-{each.id}" for each in LESSONS]
    back = len(ids) - 1 - ids.index(f"lesson-{lesson.id}")
    report = lesson.run()
    claim = lesson.claim(report)
    assert claim.holds, claim.condition
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(app_url)
        wait_for_headline(page, f"{run_report(StepConfig()).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        # The lessons are one toolbar Tab stop: the arrow keys reach the lesson, Enter runs it.
        focused = "() => document.activeElement.closest('#examples button')?.id"
        stops = "() => [...document.querySelectorAll('#examples button')].filter(b => !b.tabIndex)"
        assert page.evaluate(f"() => ({stops})().length") == 1
        page.locator(f"#{ids[0]}").focus()
        page.keyboard.press("End")
        assert page.evaluate(focused) == ids[-1]
        for _ in range(back):
            page.keyboard.press("ArrowLeft")
        assert page.evaluate(focused) == f"lesson-{lesson.id}"
        assert page.evaluate(f"() => ({stops})().map(b => b.id)") == [f"lesson-{lesson.id}"]
        page.keyboard.press("Enter")
        wait_for_headline(page, f"{report.mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        page.wait_for_function(f"() => ({TEXT_JS})().includes('norms.0')")
        wait_in_view(page, "operations-table")
        # One row per operation of the run, each in the dtype the exercise preset gives it: the
        # compute dtype; the norm's result (its variance) is the first non-finite one.
        rows = page.evaluate(ROWS_JS)
        assert [row[0] for row in rows] == [op.name for op in report.operations]
        assert {row[2] for row in rows} == {"float16"}
        flagged = [row[0] for row in rows if row[3] == "inf/NaN"]
        assert flagged == ["norms.0"], rows
        text = " ".join(page.evaluate(TEXT_JS).split())
        assert "forward, inf or NaN first appeared in norms.0" in text
        low = report.mixed_initial_loss_in_compute_dtype
        high = report.mixed_initial_loss_in_float32
        assert f"{low:.7g} computed in float16, {high:.7g} in float32" in text
        # The caption is the lesson's checked claim, from this run's numbers.
        caption = " ".join(page.locator("#example-caption").inner_text().split())
        assert " ".join(claim.sentence.split()) in caption
        # The lesson's settings are in the page's address, as any lesson's are.
        changed = {k: v for k, v in lesson.overrides.items() if defaults()[k] != v}
        page.wait_for_function(
            "keys => keys.every(k => new URLSearchParams(location.search).has(k))",
            arg=list(changed),
        )
        query = {k: v[0] for k, v in parse_qs(urlparse(page.url).query).items()}
        for name, value in changed.items():
            assert type(value)(query[name]) == value, (name, query)
        link = page.url
        page.locator("#operations-table").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "operations_table_desktop.png"))
        # A refused value: the table stays as it was, dimmed with the other results.
        lr = page.locator("#lr input")
        lr.fill("-1")
        lr.press("Enter")
        expect(page.locator("#status .stale-banner")).to_be_visible()
        opacity = page.evaluate(
            "() => getComputedStyle(document.getElementById('operations-table')).opacity"
        )
        assert float(opacity) < 1
        assert " ".join(page.evaluate(TEXT_JS).split()) == text
    finally:
        page.close()

    # On a phone the lesson's link shows the same table, scrolled within its own width.
    phone = browser.new_page(viewport={"width": 390, "height": 844})
    phone.set_default_timeout(TIMEOUT_MS)
    try:
        phone.goto(link)
        wait_for_headline(phone, f"{report.mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        phone.wait_for_function(f"() => ({TEXT_JS})().includes('norms.0')")
        phone.locator("#operations-table").scroll_into_view_if_needed()
        width = phone.evaluate("() => document.documentElement.scrollWidth")
        assert width <= 390, width  # the table scrolls inside itself, not the page
        phone.screenshot(path=str(ARTIFACTS / "operations_table_phone.png"))
    finally:
        phone.close()
