"""One chain of events serves every lesson button (``ui.examples``), in headless Chromium: the
server's event learns the button clicked from the event's target, which Gradio's front end
passes along the chain from the browser-only gather, so a lesson clicked while another's run is
still on its way is the lesson the page ends on, and the page scrolls to what it points at."""

from __future__ import annotations

import re

import pytest
from test_browser import TIMEOUT_MS

from browser_waits import wait_for_headline, wait_in_view
from helpers import expected_headline
from playground.core.lessons import lesson as lesson_by_id
from playground.core.step.report import run_report
from playground.ui.examples import caption_text

pytestmark = pytest.mark.slow

RUN_TIMEOUT_MS = 3 * TIMEOUT_MS  # a lesson's first run compiles its programs
CAPTION_HAS = (
    "text => { const e = document.querySelector('#example-caption');"
    " return !!e && e.innerText.replace(/\\s+/g, ' ').includes(text); }"
)


def test_a_lesson_clicked_during_anothers_run_is_the_one_shown_and_scrolled_to(browser, app_url):
    # The first compiles programs no other lesson does (a layer norm), so its run is still on
    # its way when the second is clicked; the second points at a chart, not at the table.
    first, second = lesson_by_id("layernorm-overflow"), lesson_by_id("float16-flush")
    assert first.target != second.target
    report = run_report(second.config())
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(app_url)
        wait_for_headline(page, expected_headline(), RUN_TIMEOUT_MS)
        page.locator(f"#lesson-{first.id}").click()
        page.locator(f"#lesson-{second.id}").click()
        wait_for_headline(page, f"{report.mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        text = re.sub(r"\s+", " ", caption_text(second, report).replace("**", ""))
        page.wait_for_function(CAPTION_HAS, arg=text, timeout=TIMEOUT_MS)
        wait_in_view(page, second.target)
        dtype = page.locator("#compute_dtype input:checked").first.input_value()
        assert dtype == second.config().compute_dtype
    finally:
        page.close()
