"""Fair use of a public Space: who a visitor is, and one heavy run each.

Rules:
  visitor     the first address of the X-Forwarded-For header (the client as the Space's proxy
              saw it), else the connection's address. It is a fairness key, not a security one:
              a client can write its own header.
  heavy runs  the sweep and the training run share one lane (one at a time for everyone), and a
              visitor may have at most one of them queued or running: a second is refused at
              the door, before it takes a place in the queue, with HEAVY_REFUSAL (HTTP 429).
              The place is freed by the run's handler when it ends, whatever the outcome
              (``frees_heavy_place``); a run refused before its handler (an input that
              preprocessing refuses) is refused when it joins, through Gradio's validator
              (``admit``), so its join fails and the door frees the place at once. Should a
              queued run never be processed, the place expires after HEAVY_TTL.
"""

from __future__ import annotations

import functools
import inspect
import json
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import gradio as gr

HEAVY_ENDPOINTS = frozenset({"sweep", "dynamics"})
HEAVY_REFUSAL = (
    "one heavy run at a time per visitor: your loss-scale sweep or training run is still "
    "queued or running; send this one when it has finished"
)
HEAVY_TTL = 600.0  # seconds: well past the longest queue wait a capped run can cause

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def visitor(headers: Any, client_host: str | None) -> str:
    """The visitor key of a request (see the module rule)."""
    forwarded = headers.get("x-forwarded-for", "") if headers is not None else ""
    first = forwarded.split(",")[0].strip()
    return first or client_host or "unknown"


class HeavyRunGate:
    """Which visitors have a heavy run queued or running; thread-safe."""

    def __init__(self, ttl: float = HEAVY_TTL):
        self.ttl = ttl
        self._since: dict[str, float] = {}
        self._lock = threading.Lock()

    def enter(self, who: str) -> bool:
        """Take ``who``'s place; False when it is taken (and not yet expired)."""
        now = time.monotonic()
        with self._lock:
            if now - self._since.get(who, -self.ttl) < self.ttl:
                return False
            self._since[who] = now
            return True

    def leave(self, who: str) -> None:
        with self._lock:
            self._since.pop(who, None)


GATE = HeavyRunGate()


class HeavyRunMiddleware:
    """ASGI middleware that applies the heavy-run rule where a run joins the queue.

    It reads the body of ``POST .../queue/join`` (gradio_client and the page) and of
    ``POST .../call/<api_name>`` (raw HTTP), finds the event's API name, and answers 429 with
    HEAVY_REFUSAL when the visitor already has a heavy run; a refused or failed join frees the
    place again.
    """

    def __init__(self, app: Callable, api_names: Callable[[], dict[int, str]]):
        self.app = app
        self.api_names = api_names  # fn_index -> api_name, read from the page when needed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope.get("method") != "POST" or not (path.endswith("/queue/join") or "/call/" in path):
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        name = self._api_name(path, body)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        who = visitor(headers, (scope.get("client") or (None,))[0])
        if name in HEAVY_ENDPOINTS and not GATE.enter(who):
            await _refuse(send)
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def watch(message: dict[str, Any]) -> None:
            failed = message["type"] == "http.response.start" and message["status"] >= 400
            if failed and name in HEAVY_ENDPOINTS:
                GATE.leave(who)
            await send(message)

        await self.app(scope, replay, watch)

    def _api_name(self, path: str, body: bytes) -> str | None:
        if "/call/" in path:
            return path.rstrip("/").rsplit("/call/", 1)[1]
        try:
            fn_index = json.loads(body).get("fn_index")
        except (ValueError, AttributeError):
            return None
        return self.api_names().get(fn_index)


async def _refuse(send: Send) -> None:
    payload = json.dumps({"error": HEAVY_REFUSAL, "detail": HEAVY_REFUSAL}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def request_visitor(request: gr.Request) -> str:
    """The visitor key of the request Gradio hands an event's handler."""
    client = getattr(request, "client", None)
    return visitor(request.headers, getattr(client, "host", None))


def frees_heavy_place(handler: Callable) -> Callable:
    """``handler`` (a heavy endpoint) that frees its visitor's place however it ends.

    Gradio hands the handler the request through a ``gr.Request`` parameter appended after its
    inputs; it is no input of the API, and a direct call (no request) frees nothing.
    """
    signature = inspect.signature(handler)
    request = inspect.Parameter(
        "request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation=gr.Request
    )

    inputs = len(signature.parameters)

    @functools.wraps(handler)
    def run(*args: Any, **kwargs: Any) -> Any:
        # Gradio passes the request positionally, after every input.
        request = args[inputs] if len(args) > inputs else kwargs.pop("request", None)
        try:
            return handler(*args[:inputs], **kwargs)
        finally:
            if request is not None:
                GATE.leave(request_visitor(request))

    run.__signature__ = signature.replace(parameters=[*signature.parameters.values(), request])
    run.__annotations__ = {"request": gr.Request}  # how Gradio finds the request parameter
    del run.__wrapped__
    return run


def admit(handler: Callable) -> Callable:
    """Gradio's validator for a heavy endpoint: it admits every input as valid.

    A validator runs when the run joins the queue, and Gradio preprocesses its inputs first
    (``ui.public.PublicBlocks.preprocess_data``: the upload check), so an input refused there
    fails the join itself and the door frees the visitor's place. Every setting's own refusal
    stays the handler's (gr.Error with the field and its range, as the API has always answered).
    """

    @functools.wraps(handler)
    def validate(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [gr.validate(True, "") for _ in inspect.signature(handler).parameters]

    validate.__signature__ = inspect.signature(handler)  # the same inputs, the same defaults
    del validate.__wrapped__
    return validate
