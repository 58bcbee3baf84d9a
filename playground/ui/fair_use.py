"""Fair use of a public Space: a key per client, a share of the queue each, one heavy run each.

Rules, applied by ``HeavyRunMiddleware`` when an event joins Gradio's queue:
  client key  (``visitor``) with N = PLAYGROUND_TRUSTED_PROXIES proxies in front of the app,
              the N-th X-Forwarded-For entry from the right (each proxy appends the address it
              saw; entries further left are the client's own words); with 0, the connection's
              peer address. Default: SPACE_PROXIES on a Hugging Face Space (``SPACE_ID`` set),
              else 0.
  share       a client may have at most SHARE events queued or running, in every concurrency
              group and however they were sent (``/call/<name>``, ``/queue/join`` with any
              fn_index, the page's private events included); one more is refused before it
              joins, with SHARE_REFUSAL (HTTP 429). A session's newer page event (a private one)
              replaces its own still-queued event of the same kind, so a person using the page
              never meets the share. The count is read from Gradio's queue itself, so a slot is
              freed when its event ends, whatever the outcome.
  concurrency large work runs one request at a time, and every other concurrency group runs
              LANE_SLOTS requests at once, more than one client's share (``ui.launch``), so
              another client's small request never waits behind large work.
  heavy runs  the sweep and the training run share the ``heavy`` concurrency group (one at a
              time for everyone), and a client may have at most one of them queued or running:
              a second is refused before it joins, with HEAVY_REFUSAL (HTTP 429). The run's
              handler frees the client's slot when it ends, whatever the outcome
              (``frees_heavy_place``); a run refused before its handler (an input that
              preprocessing refuses) is refused when it joins, through Gradio's validator
              (``admit``), so its join fails and the middleware frees the slot at once. Should
              a queued run never be processed, the slot expires after HEAVY_TTL.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import gradio as gr
from starlette.datastructures import Headers

from playground.ui import gathered_inputs, session_order
from playground.ui.bodies import read_body
from playground.ui.gradio_internals import queue as gradio_queue
from playground.ui.gradio_internals.events import event_kind, event_of_join
from playground.ui.queue_records import forget_finished

HEAVY_ENDPOINTS = frozenset({"sweep", "dynamics"})
HEAVY_REFUSAL = (
    "one heavy run at a time per visitor: your loss-scale sweep or training run is still "
    "queued or running; send this one when it has finished"
)
HEAVY_TTL = 600.0  # seconds: well past the longest queue wait a capped run can cause
SHARE = 4
# Requests each concurrency group but the heavy one runs at once (its concurrency_limit): more
# than one client's share and than the crowd's large places (``ui.crowd``), so a small request
# always finds a free slot (``ui.launch``).
LANE_SLOTS = 2 * SHARE
SHARE_REFUSAL = (
    f"at most {SHARE} requests queued or running per visitor: {SHARE} of yours are still "
    "queued or running; send this one when one of them has finished"
)
# Hugging Face's Space proxy appends the client's address to X-Forwarded-For; nothing else in
# front of the app adds an entry.
SPACE_PROXIES = 1

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


def trusted_proxies(environ: Mapping[str, str] = os.environ) -> int:
    """PLAYGROUND_TRUSTED_PROXIES, or its default (see the module rule)."""
    value = environ.get("PLAYGROUND_TRUSTED_PROXIES", "").strip()
    if not value:
        return SPACE_PROXIES if environ.get("SPACE_ID") else 0
    count = int(value)
    if count < 0:
        raise ValueError(f"PLAYGROUND_TRUSTED_PROXIES must be 0 or more; got {value}")
    return count


TRUSTED_PROXIES = trusted_proxies()


def visitor(headers: Any, client_host: str | None, proxies: int | None = None) -> str:
    """The client key of a request (see the module rule).

    Args:
      headers: the request's headers (starlette's or Gradio's), or None.
      client_host: the connection's peer address.
      proxies: the trusted proxies in front of the app (default: TRUSTED_PROXIES).

    Returns:
      The key: an address, or "unknown". Every X-Forwarded-For header line counts, in order,
      as one list.

    >>> visitor({"x-forwarded-for": "10.0.0.9, 203.0.113.7"}, "127.0.0.1", proxies=1)
    '203.0.113.7'
    >>> visitor(None, "127.0.0.1", proxies=1)
    '127.0.0.1'
    """
    proxies = TRUSTED_PROXIES if proxies is None else proxies
    if proxies == 0 or headers is None:
        return client_host or "unknown"
    lines = (
        headers.getlist("x-forwarded-for")
        if hasattr(headers, "getlist")
        else [headers.get("x-forwarded-for", "")]
    )
    entries = [entry.strip() for line in lines for entry in line.split(",") if entry.strip()]
    if len(entries) >= proxies:
        return entries[-proxies]
    # Fewer entries than proxies: the leftmost one was still written by a proxy.
    return entries[0] if entries else client_host or "unknown"


class HeavyRunGate:
    """Which client keys have a heavy run queued or running; thread-safe."""

    def __init__(self, ttl: float = HEAVY_TTL):
        self.ttl = ttl
        self._since: dict[str, float] = {}
        self._lock = threading.Lock()

    def enter(self, who: str) -> bool:
        """Take ``who``'s heavy-run slot; False when it is taken (and not yet expired)."""
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
    """ASGI middleware that applies the share and the heavy-run rule where an event joins the
    queue.

    It reads the body of ``POST .../queue/join`` (gradio_client and the page) and of
    ``POST .../call/<api_name>`` (raw HTTP), finds the event, replaces the session's queued
    page event of the same kind, and answers 429 with SHARE_REFUSAL when the client has SHARE
    events in the queue, or HEAVY_REFUSAL when it already has a heavy run; a refused or failed
    join frees the heavy-run slot again.
    """

    def __init__(self, app: Callable, blocks: gr.Blocks):
        self.app = app
        self.blocks = blocks
        self.joining: Counter[str] = Counter()  # admitted joins not yet answered, per client

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope.get("method") != "POST" or not (path.endswith("/queue/join") or "/call/" in path):
            await self.app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        forget_finished(gradio_queue.queue_of(self.blocks))
        fn, session, sent = self._event(path, body)
        name = getattr(fn, "api_name", None)
        who = visitor(Headers(scope=scope), (scope.get("client") or (None,))[0])
        if fn is not None and session and fn.api_visibility == "private":
            await self._replace_queued(fn, session)
        if len(self._visitor_events(who)) + self.joining[who] >= SHARE:
            await refuse(send, SHARE_REFUSAL)
            return
        if name in HEAVY_ENDPOINTS and not GATE.enter(who):
            await refuse(send, HEAVY_REFUSAL)
            return

        async def watch(message: dict[str, Any]) -> None:
            failed = message["type"] == "http.response.start" and message["status"] >= 400
            if failed and name in HEAVY_ENDPOINTS:
                GATE.leave(who)
            await send(message)

        if fn is not None and session and fn.api_visibility == "private":
            session_order.arrived(session, event_kind(fn), sent)
        self.joining[who] += 1
        try:
            await self.app(scope, replay, watch)
        finally:
            self.joining[who] -= 1
            if not self.joining[who]:
                del self.joining[who]

    def _event(self, path: str, body: bytes) -> tuple[Any, str | None, int | None]:
        """The event's BlockFunction (None if unknown), the body's session hash, and the
        page's number for the event (the gathered box's, ``gathered_inputs.sent_number``;
        None when it carries none)."""
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        payload = payload if isinstance(payload, dict) else {}
        session = payload.get("session_hash")
        session = session if isinstance(session, str) else None
        fn = event_of_join(self.blocks, path, payload)
        inputs = payload.get("data")
        sent = gathered_inputs.sent_number(fn, inputs if isinstance(inputs, list) else [])
        return fn, session, sent

    def _visitor_events(self, who: str) -> list[Any]:
        """The client's events in Gradio's queue: waiting in any concurrency group, or
        running."""
        queued = gradio_queue.queued(gradio_queue.queue_of(self.blocks))
        return [event for event in queued if _event_visitor(event) == who]

    async def _replace_queued(self, fn: Any, session: str) -> None:
        """Drop the session's still-queued events of ``fn``, each answered as done (as
        Gradio's /cancel answers), so the newer one takes their place."""
        queue = gradio_queue.queue_of(self.blocks)
        for event in gradio_queue.waiting_in_lane(queue, fn.concurrency_id):
            queued = gradio_queue.event_fn(event)
            if gradio_queue.event_session(event) != session or (
                queued is not fn and event_kind(queued) != event_kind(fn)
            ):
                continue
            await gradio_queue.drop_waiting(queue, event)
            session_order.dropped(session, event_kind(fn))


def _event_visitor(event: Any) -> str:
    request = gradio_queue.event_request(event)
    client = getattr(request, "client", None)
    return visitor(getattr(request, "headers", None), getattr(client, "host", None))


async def refuse(send: Send, text: str) -> None:
    """Answer 429 with ``text`` (the app's JSON error), before the event joins."""
    payload = json.dumps({"error": text, "detail": text}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 429,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def request_visitor(request: gr.Request) -> str:
    """The client key of the request Gradio hands an event's handler."""
    client = getattr(request, "client", None)
    return visitor(request.headers, getattr(client, "host", None))


def frees_heavy_place(handler: Callable) -> Callable:
    """``handler`` (a heavy endpoint) that frees its client's heavy-run slot however it ends.

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

    A validator runs when the run joins the queue, after the page's own check of its inputs
    (``ui.public.PublicBlocks.admit``: the upload check) and Gradio's preprocessing, so an input
    refused there fails the join itself and the middleware frees the client's slot. Every setting's
    own refusal stays the handler's (gr.Error with the field and its range, as the API has
    always answered).
    """

    @functools.wraps(handler)
    def validate(*args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return [gr.validate(True, "") for _ in inspect.signature(handler).parameters]

    validate.__signature__ = inspect.signature(handler)  # the same inputs, the same defaults
    del validate.__wrapped__
    return validate
