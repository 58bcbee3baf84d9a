"""Raw calls to the launched app's HTTP API, as any HTTP client would make them.

The Gradio 6 protocol, without gradio_client, so each request can carry its own visitor
(X-Forwarded-For) and any body, even one a client library would refuse to send::

    POST {url}gradio_api/call/<api>   {"data": [...]}   -> {"event_id": ...}
    GET  {url}gradio_api/call/<api>/<event_id>           -> SSE "event: complete|error"

``call`` sends one request and reads its stream to the result; it raises on a broken
connection or a result later than ``timeout`` (a test should fail then). ``attempt`` never
raises: it answers "timeout" or "exception" instead, for load measurements that count them.

Inputs are positional, in the public API's order (``FIELDS``), as a caller sees it.
"""

from __future__ import annotations

import functools
import json
import select
import socket
import time
from dataclasses import dataclass
from typing import Any

import httpx

# The public API, positionally: the ten step inputs; /dynamics adds steps, mode, period; then
# every endpoint takes the model and optimizer settings, and last the uploaded data file.
STEP_FIELDS = (
    "model_seed",
    "n",
    "d_in",
    "d_out",
    "lr",
    "loss_scale",
    "data_seed",
    "input_scale",
    "target_scale",
    "compute_dtype",
)
MODEL_FIELDS = ("model", "hidden_layers", "hidden_width", "activation", "optimizer")
RUN_FIELDS = ("steps", "mode", "period")
# Settings added after the data file, appended after it (so positional calls keep working).
FLOAT8_FIELDS = ("fp8_scaling", "amax_history")
OPERATION_FIELDS = ("precision_policy", "task", "norm")
BLOCK_FIELDS = ("outlier_share", "outlier_scale", "nvfp4_hadamard")
STATE_FIELDS = ("moments_dtype", "accumulation", "promotion_interval")
TRANSFORMER_FIELDS = ("seq_len", "heads")
# /sweep and /dynamics take `downloads` where it was appended (after float8's and the pure
# run's settings); the settings added since follow it.
FIELDS = {
    "step": (
        *STEP_FIELDS,
        *MODEL_FIELDS,
        "data",
        *FLOAT8_FIELDS,
        *OPERATION_FIELDS,
        *BLOCK_FIELDS,
        *STATE_FIELDS,
        *TRANSFORMER_FIELDS,
    ),
    "sweep": (
        *STEP_FIELDS,
        *MODEL_FIELDS,
        "data",
        *FLOAT8_FIELDS,
        "downloads",
        *OPERATION_FIELDS,
        *BLOCK_FIELDS,
        *STATE_FIELDS,
        *TRANSFORMER_FIELDS,
    ),
    "dynamics": (
        *STEP_FIELDS,
        *RUN_FIELDS,
        *MODEL_FIELDS,
        "data",
        *FLOAT8_FIELDS,
        "pure_rounding",
        "downloads",
        *OPERATION_FIELDS,
        *BLOCK_FIELDS,
        *STATE_FIELDS,
        *TRANSFORMER_FIELDS,
    ),
    "inspect": ("number",),
}
DEFAULT_STEP = [0, 256, 64, 16, 0.1, 1024.0, 0, 1.0, 1.0, "bfloat16"]
TIMEOUT = 180.0


def visitor(address: str) -> dict[str, str]:
    """The headers of a request from ``address`` (behind one trusted proxy, the
    right-hand X-Forwarded-For entry is the visitor)."""
    return {"X-Forwarded-For": address}


class Raw(str):
    """A JSON token written into the body as is (NaN, Infinity, 1e999, ...)."""


def request_body(data: list[Any], session: str | None = None) -> str:
    """``{"data": data}`` as JSON text, with ``"session_hash": session`` when given (Gradio's
    ``/call`` then runs the call in that session, as a browser tab's or a gradio_client
    Client's calls share one; without it each call is a new session); floats nan/inf become
    NaN/Infinity, Raw goes in as is."""
    raws: dict[str, str] = {}

    def mark(value: Any) -> Any:
        if isinstance(value, Raw):
            key = f"@@raw{len(raws)}@@"
            raws[key] = str(value)
            return key
        return value

    body: dict[str, Any] = {"data": [mark(value) for value in data]}
    if session is not None:
        body["session_hash"] = session
    text = json.dumps(body, allow_nan=True)
    for key, token in raws.items():
        text = text.replace(json.dumps(key), token)
    return text


@dataclass
class Answer:
    """kind: "complete", "error" (SSE error event), "http" (POST refused), "eof" (the stream
    ended without a result); from ``attempt`` also "timeout" and "exception". payload: the
    outputs (complete), the error data (error), the response text (http)."""

    kind: str
    status: int
    payload: Any
    seconds: float = 0.0  # from the POST to the result

    @property
    def message(self) -> str:
        """The refusal's text ("" for a completed call)."""
        if self.kind == "complete":
            return ""
        if self.kind == "http":
            return str(self.payload)
        if isinstance(self.payload, dict):
            return str(self.payload.get("error") or "")
        return "" if self.payload is None else str(self.payload)


def call(
    url: str,
    api: str,
    data: list[Any] | None = None,
    headers: dict[str, str] | None = None,
    http: httpx.Client | None = None,
    *,
    body: str | None = None,
    session: str | None = None,
    timeout: float = TIMEOUT,
) -> Answer:
    """POST the inputs (or ``body`` as is), in ``session`` when given (``request_body``), then
    read the event stream to its result.

    ``http`` reuses a client's connections; raises ``TimeoutError`` when no result arrives
    within ``timeout`` seconds (heartbeats keep the stream alive meanwhile)."""
    client = http or httpx.Client(timeout=timeout)
    headers = headers or {}
    start = time.perf_counter()
    deadline = time.monotonic() + timeout
    try:
        posted = client.post(
            f"{url}gradio_api/call/{api}",
            content=request_body(data or [], session) if body is None else body,
            headers={"content-type": "application/json", **headers},
        )
        answer = Answer("http", posted.status_code, posted.text)
        if posted.status_code == 200:
            answer = Answer("eof", 200, None)
            event = None
            stream_url = f"{url}gradio_api/call/{api}/{posted.json()['event_id']}"
            with client.stream("GET", stream_url, headers=headers) as stream:
                for line in stream.iter_lines():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"/{api}: no result within {timeout:.0f} s")
                    if line.startswith("event:"):
                        event = line.partition(":")[2].strip()
                    elif line.startswith("data:") and event in ("complete", "error"):
                        answer = Answer(event, stream.status_code, json.loads(line[5:]))
                        break
    finally:
        if http is None:
            client.close()
    answer.seconds = time.perf_counter() - start
    return answer


def attempt(
    url: str,
    api: str,
    data: list[Any],
    headers: dict[str, str] | None = None,
    http: httpx.Client | None = None,
    *,
    session: str | None = None,
    timeout: float = TIMEOUT,
) -> Answer:
    """``call``, but a late result is a "timeout" answer and a broken connection an
    "exception" answer (both timed), never an exception."""
    start = time.perf_counter()
    try:
        return call(url, api, data, headers, http, session=session, timeout=timeout)
    except (TimeoutError, httpx.TimeoutException):
        answer = Answer("timeout", 0, f"no result within {timeout:.0f} s")
    except httpx.HTTPError as error:
        answer = Answer("exception", 0, repr(error))
    answer.seconds = time.perf_counter() - start
    return answer


def fn_index(url: str, api_name: str) -> int:
    """The fn_index of the event named ``api_name`` in the page's config (private ones too)."""
    config = httpx.get(f"{url}config", timeout=30).json()
    for dependency in config["dependencies"]:
        if dependency.get("api_name") == api_name:
            return dependency["id"]
    raise KeyError(api_name)


def commit_inputs(step: list[Any], url: str) -> list[Any]:
    """The page's commit inputs (``ui.gathered_inputs``): one box holding every input of /step
    in its order (``step``'s leading ones, the rest at their defaults, no data), then the
    controls its stale checks read (``Page.with_checks``) at the values the page's config gives
    them; then one None per State it reads (Gradio keeps those server-side)."""
    from playground.core.settings.settings import defaults
    from playground.ui.arguments import STEP

    given = dict(zip((*STEP_FIELDS, *MODEL_FIELDS), step, strict=False))
    values = defaults() | {"data": None} | given
    checked, states = _commit_parts(url, len(STEP.order))
    return [{"values": [*(values[name] for name in STEP.order), *checked]}, *[None] * states]


@functools.cache
def _commit_parts(url: str, step_inputs: int) -> tuple[tuple, int]:
    """The config's values of the controls the commit gathers after /step's ``step_inputs``
    (the inputs of the browser-only event that on_commit follows), and the number of States
    on_commit reads."""
    config = httpx.get(f"{url}config", timeout=30).json()
    by_id = {dependency["id"]: dependency for dependency in config["dependencies"]}
    event = next(d for d in config["dependencies"] if d.get("api_name") == "on_commit")
    gather = by_id[event["trigger_after"]]
    props = {component["id"]: component.get("props", {}) for component in config["components"]}
    checked = tuple(props[index].get("value") for index in gather["inputs"][step_inputs:])
    return checked, len(event["inputs"]) - 1


def join(
    url: str,
    index: int,
    data: list[Any],
    headers: dict[str, str] | None = None,
    *,
    session_hash: str,
    timeout: float = TIMEOUT,
) -> Answer:
    """An event joined as the page joins it (``POST queue/join`` with a fn_index and a session),
    then its result read from the session's stream (``GET queue/data``); timed like ``call``.

    The answer is "complete" (payload: the output data) or "error" (the error's message), "http"
    when the join is refused."""
    headers = headers or {}
    start = time.perf_counter()
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=timeout) as client:
        posted = client.post(
            f"{url}gradio_api/queue/join",
            json={"data": data, "fn_index": index, "session_hash": session_hash},
            headers=headers,
        )
        answer = Answer("http", posted.status_code, posted.text)
        if posted.status_code == 200:
            event_id = posted.json()["event_id"]
            answer = Answer("eof", 200, None)
            stream_url = f"{url}gradio_api/queue/data?session_hash={session_hash}"
            with client.stream("GET", stream_url, headers=headers) as stream:
                for line in stream.iter_lines():
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"join {index}: no result within {timeout:.0f} s")
                    if not line.startswith("data:"):
                        continue
                    message = json.loads(line[5:])
                    if message.get("event_id") != event_id:
                        continue
                    if message.get("msg") == "process_completed":
                        output = message.get("output") or {}
                        kind = "complete" if message.get("success") else "error"
                        answer = Answer(kind, 200, output.get("data", output.get("error")))
                        break
    answer.seconds = time.perf_counter() - start
    return answer


def joins(
    url: str,
    index: int,
    inputs: list[list[Any]],
    headers: dict[str, str] | None = None,
    *,
    session_hash: str,
    timeout: float = TIMEOUT,
) -> list[Answer]:
    """Several events of one session joined back to back, their results read from the
    session's one stream (as the page reads them); answers in the order joined, each timed
    from the first join."""
    headers = headers or {}
    start = time.perf_counter()
    deadline = time.monotonic() + timeout
    answers: dict[str, Answer] = {}
    with httpx.Client(timeout=timeout) as client:
        order = []
        for data in inputs:
            posted = client.post(
                f"{url}gradio_api/queue/join",
                json={"data": data, "fn_index": index, "session_hash": session_hash},
                headers=headers,
            )
            posted.raise_for_status()
            order.append(posted.json()["event_id"])
        stream_url = f"{url}gradio_api/queue/data?session_hash={session_hash}"
        with client.stream("GET", stream_url, headers=headers) as stream:
            for line in stream.iter_lines():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"joins {index}: no results within {timeout:.0f} s")
                message = json.loads(line[5:]) if line.startswith("data:") else {}
                if message.get("msg") == "process_completed" and message["event_id"] in order:
                    output = message.get("output") or {}
                    kind = "complete" if message.get("success") else "error"
                    answer = Answer(kind, 200, output.get("data", output.get("error")))
                    answer.seconds = time.perf_counter() - start
                    answers[message["event_id"]] = answer
                    if len(answers) == len(order):
                        break
    return [answers[event_id] for event_id in order]


def send_body(
    port: int, path: str, size: int, *, chunked: bool = False, timeout: float = 30.0
) -> tuple[int, str, int]:
    """POST ``size`` bytes to ``path`` on 127.0.0.1:``port`` over a raw socket, as a client that
    keeps sending until the server answers: with a Content-Length, or streamed in chunks without
    one. Returns (HTTP status, the answer's text, bytes sent); status 0 when no answer came."""
    piece = b" " * 2**20
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {size}\r\n"
        sock.sendall(f"{head}\r\n".encode())
        sent = 0
        try:
            while sent < size and not select.select([sock], [], [], 0)[0]:
                data = piece[: size - sent]
                framed = f"{len(data):x}\r\n".encode() + data + b"\r\n" if chunked else data
                sock.sendall(framed)
                sent += len(data)
            if chunked and sent == size:
                sock.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed while we were still sending
            pass
        reply = b""
        try:
            while got := sock.recv(65536):
                reply += got
        except OSError:
            pass
    head, _, body = reply.partition(b"\r\n\r\n")
    status_line = head.split(b"\r\n", 1)[0].split()
    status = int(status_line[1]) if len(status_line) > 1 and status_line[1].isdigit() else 0
    return status, body.decode(errors="replace"), sent
