"""Pytest plugin: one real app server per test session, shared by the API and browser tests.

Enabled in tests/conftest.py with ``pytest_plugins = ["fixtures_app"]``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from app_server import AppServer


@pytest.fixture(scope="session")
def app_server() -> Iterator[AppServer]:
    """``python app.py`` on a free port; stopped at the end of the session. Its log is named
    for the xdist worker: the other worker launches an app of its own (conftest's
    BESIDE_THE_SHARED_APP), and one log file for both had one server's log read as the other's
    (the second to start truncated the file)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with AppServer(log_name=f"app_server_{worker}.log") as server:
        yield server


@pytest.fixture(scope="session")
def app_url(app_server: AppServer) -> str:
    """The running app's base URL, e.g. ``http://127.0.0.1:41234/``."""
    return app_server.url


@pytest.fixture
def quiet_log(app_server: AppServer) -> Iterator[None]:
    """Fails the test if the shared app's log gains a traceback while it runs."""
    start = len(app_server.log_text())
    yield
    added = app_server.log_text()[start:]
    assert "Traceback" not in added and "Exception in ASGI" not in added, added[-3000:]


@pytest.fixture(scope="session")
def client(app_url: str):
    """A gradio_client.Client connected to the running app."""
    from gradio_client import Client

    return Client(app_url, verbose=False)


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _unavailable(reason: str) -> None:
    """Skip on a developer machine; fail under CI, where the browser tests must run."""
    if os.environ.get("CI"):
        pytest.fail(f"browser tests must run in CI: {reason}", pytrace=False)
    pytest.skip(reason)


# How long a browser test's ``expect`` waits for its condition (Playwright's default is 5 s). An
# assertion on the page waits on the app's events (a run's follow-up event clears a stale
# banner after the run's reading is shown): on 2 busy vCPUs those take longer than 5 s, so the
# test failed by the clock, not by the page. A longer wait changes nothing when the condition
# holds; when it never does, the test still fails.
EXPECT_TIMEOUT_MS = 30_000


@pytest.fixture(scope="session")
def browser():
    """Headless Debian Chromium driven by Playwright, shared by every browser test; every
    ``expect`` waits up to EXPECT_TIMEOUT_MS."""
    if not CHROMIUM.exists():
        _unavailable(f"{CHROMIUM} is missing (Debian package `chromium`)")
    try:
        from playwright import sync_api
    except ImportError as error:
        _unavailable(f"playwright is not installed ({error})")
    sync_api.expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()
