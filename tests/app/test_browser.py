"""The page in real headless Chromium: it loads, recomputes on a committed input, and fits a phone
screen. Controls are selected by their elem_id, which is their settings field name."""

from __future__ import annotations

from pathlib import Path

import pytest

from browser_waits import headline, wait_for_new_headline
from helpers import TIMEOUT_MS, expected_headline, open_page, select_tab

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"


def test_page_recomputes_when_inputs_change(browser, app_url):
    page = open_page(browser, app_url, 1280, 900)
    try:
        first = headline(page)
        assert first == expected_headline()
        assert page.locator(".js-plotly-plot").count() >= 1
        assert "bfloat16 compute" in page.locator("#headline").inner_text()

        lr = page.locator("#lr input")
        lr.fill("0.5")
        lr.press("Enter")  # a number applies on Enter
        second = wait_for_new_headline(page, first, TIMEOUT_MS)
        assert second == expected_headline(lr=0.5)

        page.locator("#compute_dtype").get_by_role("radio", name="float16", exact=True).check()
        page.wait_for_function(
            "() => document.querySelector('#headline').innerText.includes('float16 compute')",
            timeout=TIMEOUT_MS,
        )
        third = wait_for_new_headline(page, second, TIMEOUT_MS)
        assert third == expected_headline(lr=0.5, compute_dtype="float16")
        assert "bfloat16" not in page.locator("#headline").inner_text()

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "desktop.png"), full_page=True)
    finally:
        page.close()


def _widths(page) -> tuple[int, int]:
    return tuple(page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]"))


def _tab_names(page) -> list[str]:
    """The section tabs' labels, in order."""
    return page.locator("#sections [role=tab]").all_inner_texts()


@pytest.mark.slow
def test_phone_width_has_no_horizontal_overflow(browser, app_url):
    page = open_page(browser, app_url, 390, 844)
    try:
        assert headline(page) == expected_headline()
        scroll_width, inner_width = _widths(page)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "phone.png"), full_page=True)
        assert inner_width == 390
        assert scroll_width <= inner_width + 1, f"page is {scroll_width}px wide at {inner_width}px"

        # Every tab, not just the first: each holds its own charts and tables.
        tabs = _tab_names(page)
        assert len(tabs) >= 4, tabs
        for name in tabs[1:]:
            select_tab(page, name)
            scroll_width, inner_width = _widths(page)
            assert scroll_width <= inner_width + 1, f"tab {name!r} is {scroll_width}px wide"
    finally:
        page.close()
