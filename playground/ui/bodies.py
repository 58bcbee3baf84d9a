"""A request body read whole by a middleware, then handed on as if unread.

Rule: ``read_body(receive)`` takes every ``http.request`` message of the body and returns the
bytes with a ``receive`` for the app behind: its first call gives the whole body in one message,
every later one passes through to the server's own (for the disconnect). The body guard
(``ui.upload_guard``) caps its size before any of this runs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Receive = Callable[[], Awaitable[dict[str, Any]]]


async def read_body(receive: Receive) -> tuple[bytes, Receive]:
    """(the whole body, a receive that replays it once and then passes through)."""
    body, more = b"", True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
    replayed = False

    async def replay() -> dict[str, Any]:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return {"type": "http.request", "body": body, "more_body": False}

    return body, replay
