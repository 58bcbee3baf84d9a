"""The accumulation's controls and reading on the page, in real headless Chromium."""

from __future__ import annotations

import pytest

from browser_waits import field_message
from playground import StepConfig, run_report
from playground.sections.step.summary import reading

pytestmark = pytest.mark.slow

TIMEOUT_MS = 90_000
CHANGES = {"accumulation": "bfloat16", "promotion_interval": 128, "moments_dtype": "bfloat16"}


def test_the_url_sets_the_accumulation_and_the_reading_says_what_it_cost(browser, app_url):
    expected = next(
        sentence
        for sentence in reading(run_report(StepConfig(**CHANGES)))
        if "significant bits" in sentence
    )
    page = browser.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    try:
        query = "&".join(f"{name}={value}" for name, value in CHANGES.items())
        page.goto(f"{app_url}?{query}")
        # The sentence's first figure, computed here: the page shows this run's numbers.
        figure = expected.split("off by ")[1].split(" ")[0]
        page.wait_for_function(
            "figure => document.querySelector('#reading')?.innerText.includes(figure)",
            arg=figure,
        )
        assert "promoted to float32 every 128 products" in page.locator("#reading").inner_text()
        page.get_by_text("Optimizer state and accumulation").click()
        for name in ("accumulation", "moments_dtype"):
            checked = page.locator(f"#{name} input:checked")
            assert checked.get_attribute("value") == CHANGES[name]
        interval = page.locator("#promotion_interval input")
        assert interval.input_value() == "128"
        interval.fill("100")
        interval.press("Enter")
        notice = field_message(page, "promotion_interval")
        notice.wait_for(state="visible")
        assert "promotion_interval" in notice.inner_text()
        assert "multiple of 32" in notice.inner_text()
    finally:
        page.close()
