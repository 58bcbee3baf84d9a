"""Fair use of a public Space: who a visitor is, one heavy run each, and clear arity errors.

Rules:
  visitor     the first address of the X-Forwarded-For header (the client as the Space's proxy
              saw it), else the connection's address. It is a fairness key, not a security one:
              a client can write its own header.
  heavy runs  the sweep and the training run share one lane (one at a time for everyone), and a
              visitor may have at most one of them queued or running: a second is refused at
              the door, before it takes a place in the queue, with HEAVY_REFUSAL. The place is
              freed when Gradio has processed the event, whatever the outcome (or, should a
              queued run never be processed, after HEAVY_TTL).
  arity       omitted trailing inputs take their defaults, as through gradio_client, so an
              older raw HTTP call keeps working after inputs were appended; an input with no
              default that is missing is refused with a message that names it, instead of
              Gradio's, which prints Python objects.
  files       a file input must name a file in Gradio's upload folder, checked before Gradio
              copies it into its cache (so a raw call cannot make the server read other files).
  skips       an output answered with gr.skip() (an update naming no property) is sent as
              such without touching the session: Gradio would rebuild that component for the
              session (about 1 ms each), which made an event with many outputs, most of them
              unchanged, spend 60-130 ms here instead of the handler's 3 ms.
"""

from __future__ import annotations

import copy
import inspect
import json
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.blocks import Block, convert_component_dict_to_list
from gradio.utils import get_upload_folder, is_in_or_equal

from playground.core.settings import shown

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
        self.api_names = api_names  # fn_index -> api_name, read from the Blocks when needed

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


def _is_skip(value: Any) -> bool:
    """gr.skip(): an update that names no property (so changes nothing)."""
    return isinstance(value, dict) and value == {"__type__": "update"}


def _parameters(block_fn: Any) -> list[inspect.Parameter]:
    """The handler's inputs, in order, without Gradio's request parameter."""
    return [
        parameter
        for parameter in inspect.signature(block_fn.fn).parameters.values()
        if parameter.annotation not in (gr.Request, "gr.Request")
    ]


def _fill_defaults(block_fn: Any, inputs: list[Any]) -> None:
    """Append the defaults of omitted trailing inputs (in place), as gradio_client does, so an
    older raw HTTP call that predates the later inputs keeps working; an omitted input without
    a default is left missing (and refused by ``validate_inputs``)."""
    omitted = _parameters(block_fn)[len(inputs) : len(block_fn.inputs)]
    if all(parameter.default is not inspect.Parameter.empty for parameter in omitted):
        inputs.extend(parameter.default for parameter in omitted)


class PublicBlocks(gr.Blocks):
    """gr.Blocks that frees a visitor's heavy-run place however the run ends, and whose
    too-few-inputs error names the missing inputs (see the module rule)."""

    async def process_api(self, block_fn: Any, inputs: list[Any], **kwargs: Any) -> dict:
        try:
            return await super().process_api(block_fn, inputs, **kwargs)
        finally:
            fn = self.fns[block_fn] if isinstance(block_fn, int) else block_fn
            request = kwargs.get("request")
            if fn.api_name in HEAVY_ENDPOINTS and isinstance(request, gr.Request):
                client = getattr(request, "client", None)
                GATE.leave(visitor(request.headers, getattr(client, "host", None)))

    async def preprocess_data(self, block_fn: Any, inputs: list[Any], *args: Any, **kwargs: Any):
        """Refuse a file payload whose path is not an upload, before Gradio copies it.

        Gradio moves every input file into its cache before the handler runs, and when called
        from the queue it may skip its own "was this uploaded?" check, which would copy any
        file the server can read (a raw call naming /etc/passwd did exactly that).
        """
        _fill_defaults(block_fn, inputs)
        for component, value in zip(block_fn.inputs, inputs, strict=False):
            if not isinstance(component, gr.File) or value in (None, "", [], {}):
                continue
            path = value.get("path") if isinstance(value, dict) else None
            if not isinstance(path, str) or not is_in_or_equal(
                Path(path).resolve(), get_upload_folder()
            ):
                raise gr.Error(
                    f"data must be a CSV file uploaded to this page, or empty; got {shown(value)}",
                    title="Invalid data",
                    print_exception=False,
                )
        return await super().preprocess_data(block_fn, inputs, *args, **kwargs)

    async def postprocess_data(self, block_fn: Any, predictions: Any, state: Any) -> list[Any]:
        """Gradio's postprocessing for the outputs that change; skips pass straight through."""
        if _is_skip(predictions) and len(block_fn.outputs) > 1:
            predictions = [predictions] * len(block_fn.outputs)  # one skip: skip every output
        elif (
            isinstance(predictions, dict)
            and predictions
            and all(isinstance(key, Block) for key in predictions)
        ):
            predictions = convert_component_dict_to_list(list(block_fn.outputs), predictions)
        if (
            block_fn.batch
            or len(block_fn.outputs) < 2
            or not isinstance(predictions, (list, tuple))
            or len(predictions) != len(block_fn.outputs)
        ):
            return await super().postprocess_data(block_fn, predictions, state)
        changed = [index for index, value in enumerate(predictions) if not _is_skip(value)]
        if len(changed) == len(predictions):
            return await super().postprocess_data(block_fn, predictions, state)
        output: list[Any] = [{"__type__": "update"} for _ in predictions]
        if changed:
            part = copy.copy(block_fn)
            part.outputs = [block_fn.outputs[index] for index in changed]
            values = [predictions[index] for index in changed]
            done = await super().postprocess_data(
                part, values if len(values) > 1 else values[0], state
            )
            for index, value in zip(changed, done, strict=True):
                output[index] = value
        return output

    def validate_inputs(self, block_fn: Any, inputs: list[Any]) -> None:
        needed = len(block_fn.inputs)
        if len(inputs) >= needed:
            return super().validate_inputs(block_fn, inputs)
        names = [parameter.name for parameter in _parameters(block_fn)][:needed]
        missing = ", ".join(names[len(inputs) :])
        raise gr.Error(
            f"{block_fn.api_name or 'this event'} takes {needed} inputs "
            f"({', '.join(names)}); got {len(inputs)}, missing {missing}. gradio_client fills "
            "omitted trailing inputs with their defaults; a raw HTTP call must send them all.",
            title="Missing inputs",
            print_exception=False,
        )
