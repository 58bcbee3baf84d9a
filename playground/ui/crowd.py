"""Server-wide limits on heavy work, so that light requests are served whatever the crowd.

Rule, counted over all clients (whatever their keys) when an event joins Gradio's queue::

    kind(event) = "run"    a sweep or training run (concurrency_id HEAVY_LANE)
                  "large"  any other event whose work (``core.settings.cost``, priced from the
                           join's raw inputs) is over LARGE_WORK
                  None     anything else: never refused here
    held(kind)  = events of that kind queued or running in Gradio's queue
                  + joins of that kind admitted but not yet answered
    refuse with REFUSALS[kind] (HTTP 429) when held(kind) >= PLACES[kind]

``CrowdMiddleware`` runs inside ``ui.fair_use``'s middleware, which frees the client's heavy-run
slot when this one refuses. Both limits are above one client's share, so no single client takes
them all; LARGE_PLACES is below a concurrency group's limit (LANE_SLOTS), so a small request
always finds a free slot; and with the per-client shares they keep Gradio's queue far from its
``max_size``, which a crowd rotating client keys could otherwise fill (a small /step would then
get 503).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from playground.ui.bodies import read_body
from playground.ui.fair_use import LANE_SLOTS, SHARE, refuse
from playground.ui.gradio_internals import queue as gradio_queue
from playground.ui.gradio_internals.events import event_of_join

# Work (core.settings.cost's multiply-adds) above which a request is large work, run one at a
# time (``ui.launch``): an eighth of the largest linear step (2^33).
LARGE_WORK = 2**30
HEAVY_LANE = "heavy"  # the concurrency_id of the sweeps and the training runs
LARGE_PLACES = LANE_SLOTS - 1
RUN_PLACES = 2 * SHARE
LARGE_REFUSAL = (
    f"the server takes at most {LARGE_PLACES} large requests (over "
    f"2^{LARGE_WORK.bit_length() - 1} multiply-adds) queued or running at once, from all "
    "visitors, so that small ones always find room; send this one when one has finished, or a "
    "smaller one now"
)
RUN_REFUSAL = (
    f"the server takes at most {RUN_PLACES} sweeps and training runs queued or running at once, "
    "from all visitors, so that small requests always find room; send this one when one has "
    "finished"
)
PLACES = {"large": LARGE_PLACES, "run": RUN_PLACES}
REFUSALS = {"large": LARGE_REFUSAL, "run": RUN_REFUSAL}


class CrowdMiddleware:
    """ASGI middleware applying the rule where an event joins the queue (``POST .../queue/join``
    and ``POST .../call/<api_name>``); ``work(fn, inputs)`` prices an event's raw inputs
    (``ui.launch.event_work``). Its counts change in the server's event loop only."""

    def __init__(self, app: Callable, blocks: Any, work: Callable[[Any, list[Any]], float]):
        self.app, self.blocks, self.work = app, blocks, work
        self.joining: Counter[str | None] = Counter()  # admitted joins not yet answered, per kind
        self._kinds: dict[str, str | None] = {}  # event id -> its kind, for queued events

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if scope.get("method") != "POST" or not (path.endswith("/queue/join") or "/call/" in path):
            await self.app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        fn, inputs = self._event(path, body)
        kind = self.kind(fn, inputs) if fn is not None else None
        if (refusal := self.refusal(kind)) is not None:
            await refuse(send, refusal)
            return
        self.joining[kind] += 1
        try:
            await self.app(scope, replay, send)
        finally:
            self.joining[kind] -= 1

    def _event(self, path: str, body: bytes) -> tuple[Any, list[Any]]:
        """The event's BlockFunction (None if unknown) and the body's raw inputs."""
        try:
            payload = json.loads(body)
        except ValueError:
            payload = None
        payload = payload if isinstance(payload, dict) else {}
        inputs = payload.get("data") if isinstance(payload.get("data"), list) else []
        return event_of_join(self.blocks, path, payload), inputs

    def kind(self, fn: Any, inputs: list[Any]) -> str | None:
        """ "run" in the heavy concurrency group, "large" for other work over LARGE_WORK, else
        None."""
        if fn.concurrency_id == HEAVY_LANE:
            return "run"
        return "large" if self.work(fn, inputs) > LARGE_WORK else None

    def refusal(self, kind: str | None) -> str | None:
        """The refusal of one more event of ``kind`` beside the events queued or running in
        Gradio's queue (each priced once) and the admitted joins; None when it fits."""
        if kind is None:
            return None
        kinds = {}
        for event in gradio_queue.queued(gradio_queue.queue_of(self.blocks)):
            event_id = gradio_queue.event_id(event)
            if event_id not in self._kinds:
                inputs = gradio_queue.event_inputs(event)
                self._kinds[event_id] = self.kind(gradio_queue.event_fn(event), inputs)
            kinds[event_id] = self._kinds[event_id]
        self._kinds = kinds  # forget the events that left the queue
        held = sum(1 for found in kinds.values() if found == kind) + self.joining[kind]
        return REFUSALS[kind] if held >= PLACES[kind] else None
