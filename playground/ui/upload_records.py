"""The upload route's record: which client uploaded which file, kept at upload time.

Rule: every answer of Gradio's upload route (``POST .../upload``, admitted by
``ui.upload_guard``) that succeeds lists the paths Gradio wrote; each is recorded as a fresh
upload of the client who sent it (``ui.fair_use``'s key), for ``ui.uploads``' admit rule. A
client that disconnects midway through its upload ends the request quietly: there is nobody
left to answer, and the partial file expires (``views.file_store.expire_uploads``).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request

from playground.ui import uploads
from playground.ui.fair_use import request_visitor

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
# An upload route's answer lists at most Gradio's 1,000 files per upload, each path a few
# hundred bytes; a longer body is no such answer (and records nothing).
ANSWER_BYTES = 2**20


def is_upload(scope: Scope) -> bool:
    """Whether the request is a POST to Gradio's upload route."""
    path = scope.get("path", "") if scope["type"] == "http" else ""
    return scope.get("method") == "POST" and path.rstrip("/").endswith("/upload")


def uploaded_paths(body: bytes) -> list[str]:
    """The paths in an upload route's JSON answer (a list of strings), [] for anything else."""
    try:
        answer = json.loads(body)
    except ValueError:
        return []
    if not isinstance(answer, list):
        return []
    return [path for path in answer if isinstance(path, str)]


class UploadRecords:
    """ASGI middleware applying the module's rule to Gradio's upload route."""

    def __init__(self, app: Callable):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not is_upload(scope):
            await self.app(scope, receive, send)
            return
        who = request_visitor(Request(scope))
        status, body = 0, b""

        async def watch(message: dict[str, Any]) -> None:
            nonlocal status, body
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and status == 200:
                body = (body + message.get("body", b""))[: ANSWER_BYTES + 1]
                if not message.get("more_body", False):
                    # Recorded before the client reads the answer, so its next event finds it.
                    uploads.record(who, uploaded_paths(body))
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except ClientDisconnect:
            return  # the client left midway: nobody to answer, nothing to log


def upload_records() -> Middleware:
    """The middleware, for ``launch``'s ``app_kwargs``: inside ``ui.upload_guard``'s, so a
    refused upload never reaches it."""
    return Middleware(UploadRecords)
