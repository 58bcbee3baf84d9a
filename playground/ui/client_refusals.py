"""A refused join, told to gradio_client in words it shows.

gradio_client (2.7.2) turns a refused ``POST .../queue/join`` into an exception without the
answer's body: 503 is "Queue is full!", 422 a validator's list, anything else a bare
``httpx.HTTPStatusError`` ("429 Too Many Requests"), so the app's message never reached a
script. What it does show is an event that ends in an error: ``AppError`` with the message,
as for any other refusal of the app.

Rule: a join from gradio_client (it marks its joins ``x-gradio-user: api``) that the app refuses
with a 4xx other than 422 (the fair share's and the heavy run's 429, a validator's 400) is
answered instead as an accepted join (200 and a new event id) whose event has already ended,
with the refusal's message as its error, on the session's stream. Nothing joins Gradio's queue,
so nothing runs and no place is taken. The page and raw HTTP callers keep the 4xx and its JSON
(the page shows its ``detail``). Sessions that a refusal opened are at most REFUSED_SESSIONS;
past that the oldest one's unread refusal is dropped.
"""

from __future__ import annotations

import collections
import json
from collections.abc import Awaitable, Callable
from typing import Any

import gradio as gr
from starlette.datastructures import Headers

from playground.ui.bodies import read_body
from playground.ui.gradio_internals import queue as gradio_queue

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
REFUSED_SESSIONS = 256


def from_client(scope: Scope) -> bool:
    """Whether the request is a join sent by gradio_client."""
    path = scope.get("path", "") if scope["type"] == "http" else ""
    if scope.get("method") != "POST" or not path.rstrip("/").endswith("/queue/join"):
        return False
    return Headers(scope=scope).get("x-gradio-user") == "api"


def refusal_text(body: bytes) -> str | None:
    """The message of a refusal's JSON answer (its ``detail``, else ``error``), or None."""
    try:
        answer = json.loads(body)
    except ValueError:
        return None
    text = answer.get("detail") or answer.get("error") if isinstance(answer, dict) else None
    return text if isinstance(text, str) else None


class ClientRefusals:
    """ASGI middleware applying the module's rule; outside every middleware that refuses
    joins."""

    def __init__(self, app: Callable, blocks: gr.Blocks):
        self.app, self.blocks = app, blocks
        self.opened: collections.OrderedDict[str, str] = collections.OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not from_client(scope):
            await self.app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        held: dict[str, Any] | None = None
        answer = b""

        async def watch(message: dict[str, Any]) -> None:
            nonlocal held, answer
            if message["type"] == "http.response.start":
                status = message["status"]
                if 400 <= status < 500 and status != 422:
                    held = message  # a refusal: kept until its body is known
                    return
            if held is None:
                await send(message)
                return
            answer += message.get("body", b"")  # a refusal's JSON: one short message
            if message.get("more_body", False):
                return
            text, session = refusal_text(answer), _session(body)
            if text is None or session is None:
                await send(held)
                await send({"type": "http.response.body", "body": answer})
                return
            event_id = await self._refuse_on_stream(session, text)
            await _answer(send, {"event_id": event_id})

        await self.app(scope, replay, watch)

    async def _refuse_on_stream(self, session: str, text: str) -> str:
        """Put an ended event with ``text`` as its error on ``session``'s stream; its id."""
        queue = gradio_queue.queue_of(self.blocks)
        event_id, opened = await gradio_queue.end_on_stream(queue, session, text, "Refused")
        if opened:
            self.opened[session] = event_id
            while len(self.opened) > REFUSED_SESSIONS:
                # Drop the oldest session a refusal opened, if that refusal is all it holds.
                gradio_queue.forget_stream(queue, *self.opened.popitem(last=False))
        return event_id


def _session(body: bytes) -> str | None:
    try:
        payload = json.loads(body)
    except ValueError:
        return None
    session = payload.get("session_hash") if isinstance(payload, dict) else None
    return session if isinstance(session, str) and session else None


async def _answer(send: Send, payload: dict[str, Any]) -> None:
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(payload).encode()})
