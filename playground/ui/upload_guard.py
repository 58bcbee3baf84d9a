"""Request body limits (ASGI middleware): a size cap on every body, and for Gradio's upload
route a per-client hourly byte budget and the disk's total bound.

Rules:
  bodies   a request body (any route but the upload route) is at most MAX_BODY_BYTES, well
           above the largest request the page or the API sends (a page event carrying a
           sweep's summary back). A body that states a larger Content-Length is refused with
           413 naming the cap before a byte of it is read; one streamed without a
           Content-Length is counted as it arrives and refused once it passes the cap. So the
           server holds at most the cap per request, whatever a client sends (Gradio would
           parse a large JSON body in memory, at several times its size).
  uploads  every ``POST .../upload`` states its size (Content-Length; a chunked upload is
           refused with 411) and is charged that many bytes against its client
           (``ui.fair_use``'s key) before Gradio reads a byte of it:

    per client   at most UPLOAD_BYTES_PER_HOUR over the last hour; an upload past it is refused
                 with 429 (413 when it alone is larger), naming the cap and when the budget
                 allows it again
    in total     the upload must fit within the app's disk bound (``views.file_store``: uploads
                 and downloads together), older downloads deleted to free space; else 507

A refused upload never reaches Gradio, so it leaves no file; Gradio deletes what it refuses
itself (a file past ``max_file_size``, which it streams to disk, never to memory), and an upload
cut off midway or never read by an event expires (``file_store.expire_uploads``).
"""

from __future__ import annotations

import collections
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request

from playground.ui.fair_use import request_visitor
from playground.views import file_store

UPLOAD_BYTES_PER_HOUR = int(float(os.environ.get("PLAYGROUND_UPLOAD_MB_PER_HOUR", 240)) * 2**20)
HOUR = 3600.0
# The largest legal body is a page event that sends a sweep's JSON summary back (bfloat16's 127
# scales: about 8 kB; a training run's about 2 kB); 32 times that leaves a margin for any input.
MAX_BODY_BYTES = 256 * 2**10
BODY_REFUSAL = (
    f"Request bodies are capped at {MAX_BODY_BYTES // 2**10} kB (the largest request this app "
    "takes is about 8 kB; files go through the upload route)"
)

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def _mb(nbytes: float) -> str:
    return f"{nbytes / 2**20:,.1f} MB"


class UploadLedger:
    """Bytes each client uploaded over the last hour; thread-safe."""

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
                del self._sent[key]  # nothing within the hour: forget the client
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


class BodyGuard:
    """ASGI middleware applying the module's rules: the upload route's, and every other
    body's cap."""

    def __init__(self, app: Callable, ledger: UploadLedger = LEDGER, cap: int = MAX_BODY_BYTES):
        self.app, self.ledger, self.cap = app, ledger, cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("method") == "POST" and scope.get("path", "").rstrip("/").endswith("/upload"):
            await self._upload(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is None and "transfer-encoding" not in headers:
            await self.app(scope, receive, send)  # no body (uvicorn refuses a bad length)
            return
        if length is not None and length.isdigit() and int(length) > self.cap:
            await _refuse(send, 413, f"{BODY_REFUSAL}; this one is {_size(int(length))}.")
            return
        body = await _read_capped(receive, self.cap)
        if body is None:  # past the cap while it arrived, or the client left
            await _refuse(send, 413, f"{BODY_REFUSAL}; this one passed it as it arrived.")
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()  # what comes after the body: the client leaving
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _upload(self, scope: Scope, receive: Receive, send: Send) -> None:
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


def _size(nbytes: int) -> str:
    return _mb(nbytes) if nbytes >= 2**20 else f"{nbytes / 2**10:,.0f} kB"


async def _read_capped(receive: Receive, cap: int) -> bytes | None:
    """The request's body, read as it arrives; None once it passes ``cap`` bytes (the rest is
    never read) or when the client leaves before its end."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _refuse(send: Send, status: int, message: str) -> None:
    payload = json.dumps({"error": message, "detail": message}).encode()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


def disk_middleware() -> Middleware:
    """Claim the app's folder on disk (``file_store.claim``: leftovers of an earlier run go)
    and return the body-limit middleware, for ``launch``'s ``app_kwargs``; call before the
    launch."""
    file_store.claim()
    return Middleware(BodyGuard)
