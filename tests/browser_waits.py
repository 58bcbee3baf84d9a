"""Waits on the page in a real browser (Playwright), written once for every browser test.

The page answers a committed input by running the step; the run is over when the headline's
mixed new loss (``#headline #mixed-new-loss``) shows its new value. Each wait polls the page
until its condition holds and, past its timeout (the page's default unless given), fails
naming what the page shows instead.
"""

from __future__ import annotations

from playwright.sync_api import Error as PlaywrightError

HEADLINE = "#headline #mixed-new-loss"
_SHOWN = f"document.querySelector('{HEADLINE}')"


def headline(page) -> str:
    """The mixed new loss as the headline shows it now."""
    return page.locator(HEADLINE).inner_text().strip()


def _wait(page, condition: str, arg, timeout: float | None, waiting_for: str) -> None:
    try:
        page.wait_for_function(condition, arg=arg, timeout=timeout)
    except PlaywrightError as error:
        shown = page.evaluate(f"() => {_SHOWN}?.textContent.trim() ?? null")
        raise AssertionError(f"waited for {waiting_for}; the headline shows {shown!r}") from error


def wait_for_headline(page, text: str, timeout: float | None = None) -> None:
    """Wait until the headline shows ``text``."""
    condition = f"text => {_SHOWN}?.textContent.trim() === text"
    _wait(page, condition, text, timeout, f"the headline to show {text!r}")


def wait_for_new_headline(page, old: str, timeout: float | None = None) -> str:
    """Wait until the headline shows anything but ``old`` (a run has ended); return it."""
    condition = f"old => {{ const e = {_SHOWN}; return !!e && e.textContent.trim() !== old; }}"
    _wait(page, condition, old, timeout, f"the headline to change from {old!r}")
    return headline(page)


# A refused value's message: the data upload's notice, else its control's help line, marked.
INVALID = "field-invalid"


def field_message(page, field: str):
    """The locator of ``field``'s message as the page shows a refused value."""
    if field == "data":
        return page.locator("#data-notice")
    return page.locator(f"#{field}.{INVALID} .info-text")


def wait_for_notice_or_headline(page, field: str, text: str, timeout: float | None = None) -> None:
    """Wait until ``field``'s message shows (a refused value) or the headline shows ``text``."""
    condition = (
        "([field, text]) => { const control = document.getElementById(field);"
        f" return (control !== null && control.classList.contains({INVALID!r}))"
        f" || {_SHOWN}?.textContent.trim() === text; }}"
    )
    _wait(page, condition, [field, text], timeout, f"{field}'s message or the headline {text!r}")


def wait_in_view(page, elem_id: str, timeout: float | None = None) -> None:
    """Wait until the element ``elem_id`` has a height and its top is on the screen."""
    condition = (
        "id => { const r = document.getElementById(id).getBoundingClientRect();"
        " return r.height > 0 && r.top >= -2 && r.top < window.innerHeight - 40; }"
    )
    _wait(page, condition, elem_id, timeout, f"#{elem_id} to scroll into view")


def navigate(page, url: str, timeout: float | None = None) -> None:
    """Open ``url`` in ``page``, by way of about:blank when the page shows a document already.

    Until the next document commits, the one being left keeps running: its timers, its
    event stream, Gradio's reload of a page whose connection it lost. A navigation that
    document starts in that window cancels the one asked for (``net::ERR_ABORTED``, seen
    once in a run of the whole suite on a loaded 2-vCPU machine). about:blank commits at
    once, so the window is gone before the request for ``url`` is sent.
    """
    if page.url != "about:blank":
        page.goto("about:blank")
    page.goto(url, timeout=timeout)
