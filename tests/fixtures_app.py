"""Pytest plugin: one real app server per test session, shared by the API and browser tests.

Enabled in tests/conftest.py with ``pytest_plugins = ["fixtures_app"]``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app_server import AppServer


@pytest.fixture(scope="session")
def app_server() -> Iterator[AppServer]:
    """``python app.py`` on a free port; stopped at the end of the session."""
    with AppServer() as server:
        yield server


@pytest.fixture(scope="session")
def app_url(app_server: AppServer) -> str:
    """The running app's base URL, e.g. ``http://127.0.0.1:41234/``."""
    return app_server.url


@pytest.fixture(scope="session")
def client(app_url: str):
    """A gradio_client.Client connected to the running app."""
    from gradio_client import Client

    return Client(app_url, verbose=False)
