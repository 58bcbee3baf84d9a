"""The door of Gradio's upload route: bytes per visitor per hour, and the disk's total bound.

Rule: every ``POST .../upload`` states its size (Content-Length; a chunked upload is refused
with 411) and is charged that many bytes against its visitor (``ui.fair_use``'s key) before
Gradio reads a byte of it:

    per visitor  at most UPLOAD_BYTES_PER_HOUR over the last hour; an upload past it is refused
                 with 429 (413 when it alone is larger), naming the cap and when room comes back
    in total     the upload must fit within the app's disk bound (``views.file_store``: uploads
                 and downloads together), older downloads deleted to make room; else 507

A refused upload never reaches Gradio, so it leaves no file; Gradio deletes what it refuses
itself (a file past ``max_file_size``), and an upload cut off midway or never read by an event
expires (``file_store.expire_uploads``).
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import Request

from playground.ui.fair_use import request_visitor
from playground.views import file_store

UPLOAD_BYTES_PER_HOUR = int(float(os.environ.get("PLAYGROUND_UPLOAD_MB_PER_HOUR", 20)) * 2**20)
HOUR = 3600.0

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _mb(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MB"


class UploadLedger:
    """Bytes each visitor uploaded over the last hour; thread-safe."""

    def __init__(self, cap: int = UPLOAD_BYTES_PER_HOUR, window: float = HOUR):
        self.cap, self.window = cap, window
        self._sent: dict[str, collections.deque[tuple[float, int]]] = {}
        self._lock = threading.Lock()

    def charge(self, who: str, nbytes: int) -> tuple[int, str] | None:
        """Charge ``nbytes`` to ``who``; or (HTTP status, message) refusing it, uncharged."""
        now = time.monotonic()
        with self._lock:
            stale = [key for key, sent in self._sent.items() if sent[-1][0] <= now - self.window]
            for key in stale:
                del self._sent[key]  # nothing within the hour: forget the visitor
            sent = self._sent.get(who, collections.deque())
            while sent and sent[0][0] <= now - self.window:
                sent.popleft()
            total = sum(size for _, size in sent)
            if nbytes > self.cap:
                return 413, (
                    f"Uploads are capped at {_mb(self.cap)} per visitor per hour; this upload "
                    f"alone is {_mb(nbytes)}."
                )
            if total + nbytes > self.cap:
                wait = sent[0][0] + self.window - now if sent else 0.0
                return 429, (
                    f"Uploads are capped at {_mb(self.cap)} per visitor per hour: you sent "
                    f"{_mb(total)} in the last hour and this upload is {_mb(nbytes)}; try again "
                    f"in {max(1, round(wait / 60))} min."
                )
            sent.append((now, nbytes))
            self._sent[who] = sent
            return None


LEDGER = UploadLedger()


class UploadGuard:
    """ASGI middleware applying the module's rule to Gradio's upload route."""

    def __init__(self, app: Callable, ledger: UploadLedger = LEDGER):
        self.app, self.ledger = app, ledger

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope.get("method") != "POST" or not path.rstrip("/").endswith("/upload"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        length = request.headers.get("content-length", "")
        if not length.isdigit():
            await _refuse(send, 411, "An upload must state its size (Content-Length).")
            return
        nbytes = int(length)
        refusal = self.ledger.charge(request_visitor(request), nbytes)
        if refusal is not None:
            await _refuse(send, *refusal)
            return
        if not file_store.reserve(nbytes):
            await _refuse(send, 507, str(file_store.DiskFull()))
            return
        try:
            await self.app(scope, receive, send)
        finally:
            file_store.release(nbytes)


async def _refuse(send: Send, status: int, message: str) -> None:
    payload = json.dumps({"error": message, "detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def disk_middleware() -> Middleware:
    """Claim the app's folder on disk (``file_store.claim``: leftovers of an earlier run go)
    and return the upload door, for ``launch``'s ``app_kwargs``; call before the launch."""
    file_store.claim()
    return Middleware(UploadGuard)
