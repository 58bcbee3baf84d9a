"""The settings in the URL, in real headless Chromium: read on load, written on change, copied."""

from __future__ import annotations

import contextlib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from browser_waits import headline, wait_for_headline
from playground import StepConfig, run_report
from playground.core.settings.settings import ConfigError, check_setting, defaults, settings
from playground.ui.url_state import WRITE_DELAY_MS, read_query

pytestmark = pytest.mark.slow

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
TIMEOUT_MS = 60_000
SHARED = {"lr": 0.05, "loss_scale": 8.0, "compute_dtype": "float16", "n": 64}
SHARED_QUERY = "?lr=0.05&loss_scale=8&compute_dtype=float16&n=64"
# Every text the headline's mixed new loss shows, recorded from the first one on.
RECORD_HEADLINES = """
window.headlines = [];
new MutationObserver(() => {
    const e = document.querySelector('#headline #mixed-new-loss');
    const text = e && e.textContent.trim();
    if (text && window.headlines[window.headlines.length - 1] !== text) {
        window.headlines.push(text);
    }
}).observe(document, {subtree: true, childList: true, characterData: true});
"""


def _expected(**changes) -> str:
    """The mixed new loss as the headline prints it, computed in this process."""
    return f"{run_report(StepConfig(**(defaults() | changes))).mixed_new_loss:.7g}"


def _open(page, url: str, expected: str):
    """Open ``url`` and wait until the headline shows ``expected``."""
    page.set_default_timeout(TIMEOUT_MS)
    page.add_init_script(RECORD_HEADLINES)
    page.goto(url)
    wait_for_headline(page, expected)
    return page


def _query(page) -> dict[str, str]:
    return {key: values[-1] for key, values in parse_qs(urlsplit(page.url).query).items()}


def _message(name: str, value) -> str:
    with pytest.raises(ConfigError) as caught:
        check_setting(name, value)
    return str(caught.value)


def test_query_text_is_read_as_each_field_reads_it():
    query = {"n": "1e3", "d_out": " 8 ", "lr": "nan", "model_seed": "3.5", "model": "mlp", "x": "1"}
    values, problems = read_query(query, list(settings()))
    assert values == {"n": 1000, "d_out": 8, "model": "mlp"}
    assert problems == [_message("model_seed", 3.5), _message("lr", float("nan"))]


def test_settings_are_read_from_the_url_then_written_back_on_change(browser, app_url):
    page = _open(browser.new_page(), app_url + SHARED_QUERY, _expected(**SHARED))
    try:
        # The first number shown is already the URL's: the step waited for the URL.
        assert page.evaluate("window.headlines") == [_expected(**SHARED)]
        assert page.locator("#lr input").input_value() == "0.05"
        assert page.locator("#loss_scale input").input_value() == "8"
        assert page.locator("#n input[type=number]").input_value() == "64"
        dtype = page.locator("#compute_dtype").get_by_role("radio", name="float16", exact=True)
        assert dtype.is_checked()
        assert page.locator("#url-notice").is_hidden()
        assert page.locator(".toast-body").count() == 0

        history = page.evaluate("history.length")
        lr = page.locator("#lr input")
        lr.fill("0.2")
        lr.press("Enter")
        page.wait_for_function("() => new URLSearchParams(location.search).get('lr') === '0.2'")
        assert _query(page) == {
            "lr": "0.2",
            "loss_scale": "8",
            "compute_dtype": "float16",
            "n": "64",
        }
        assert page.evaluate("history.length") == history  # replaced, not pushed
        wait_for_headline(page, _expected(**(SHARED | {"lr": 0.2})))
    finally:
        page.close()


def test_invalid_url_values_are_named_and_their_defaults_used(browser, app_url):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        _open(page, app_url + "?lr=-1&n=abc&model=%3Cb%3E*x*%3C/b%3E", _expected())
        notice = page.locator("#url-notice")
        notice.wait_for(state="visible")
        text = notice.inner_text()
        assert _message("lr", -1.0) in text
        assert _message("n", "abc") in text
        assert _message("model", "<b>*x*</b>") in text  # shown as written, not as markup
        assert page.locator(".toast-body.warning").count() == 1
        assert page.locator(".toast-body.error").count() == 0
        wait_for_headline(page, _expected())
        assert page.evaluate("window.headlines") == [_expected()]
        assert page.locator("#lr input").input_value() == "0.1"
        assert page.locator("#n input[type=number]").input_value() == "256"
        # The address now says what the page shows: the ignored values are gone from it.
        page.wait_for_function("() => location.search === ''")

        page.locator("#copy-link").click()
        link = page.locator("#link-text")
        link.wait_for(state="visible")
        assert link.locator("textarea, input").first.input_value() == page.url
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        # A viewport as tall as the page: Chromium's full-page capture alone may cut it short.
        height = page.evaluate("document.documentElement.scrollHeight")
        page.set_viewport_size({"width": 1280, "height": height})
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "url_state.png"), full_page=True)
    finally:
        page.close()


def test_hidden_settings_come_from_the_url_and_copy_link_copies_it(browser, app_url):
    # input_scale sits in a closed accordion, mode in a tab not yet opened.
    expected = _expected(input_scale=0.5)
    context = browser.new_context(permissions=["clipboard-read", "clipboard-write"])
    try:
        page = _open(context.new_page(), app_url + "?input_scale=0.5&mode=dynamic&x=1", expected)
        assert page.evaluate("window.headlines") == [expected]
        # Written back from the controls: unknown keys kept, then the settings in table order.
        page.wait_for_function("() => location.search.startsWith('?x=1&')")
        assert urlsplit(page.url).query == "x=1&input_scale=0.5&mode=dynamic"

        copy, link = page.locator("#copy-link"), page.locator("#link-text")
        copy.click()
        link.wait_for(state="visible")  # shown once the copy is done
        assert page.evaluate("navigator.clipboard.readText()") == page.url
        assert "copied" in link.inner_text()

        # Where the clipboard refuses, the link is there to copy by hand.
        page.evaluate("() => { navigator.clipboard.writeText = () => Promise.reject(); }")
        copy.click()
        page.wait_for_function(
            "() => document.querySelector('#link-text').innerText.includes('unavailable')"
        )
        assert link.locator("textarea, input").first.input_value() == page.url
    finally:
        context.close()


def test_the_url_names_only_committed_settings(browser, app_url):
    page = _open(browser.new_page(), app_url, _expected())
    try:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout

        lr = page.locator("#lr input")
        lr.fill("0.3")  # typed, not committed: the results still show lr = 0.1
        # A write would come within its pause, whatever else the page is doing.
        with contextlib.suppress(PlaywrightTimeout):
            page.wait_for_function(
                "() => new URLSearchParams(location.search).has('lr')",
                timeout=WRITE_DELAY_MS + 3000,
            )
        assert "lr" not in _query(page), f"uncommitted lr written: {page.url}"
        assert headline(page) == _expected()
        lr.press("Enter")
        wait_for_headline(page, _expected(lr=0.3))
        page.wait_for_function("() => new URLSearchParams(location.search).get('lr') === '0.3'")
    finally:
        page.close()


def test_an_over_long_query_is_sent_to_the_page_with_its_length_only():
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from playground.ui.url_state import MAX_QUERY, LongLinkRedirect, too_long_message

    client = TestClient(LongLinkRedirect(Starlette()))
    query = "lr=0.05&x=" + "a" * MAX_QUERY
    moved = client.get(f"/?{query}", follow_redirects=False)
    assert moved.status_code == 303
    assert moved.headers["location"] == f"?link_too_long={len(query)}"
    assert client.get("/?lr=0.05", follow_redirects=False).status_code == 404  # passed on
    values, problems = read_query({"link_too_long": str(len(query)), "lr": "0.05"}, ["lr"])
    assert values == {"lr": 0.05}  # read_query itself ignores the marker; the page says it
    assert f"{len(query):,} characters" in too_long_message(str(len(query)))
