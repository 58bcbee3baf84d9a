"""Room for light work whatever the crowd: server-wide places of heavy work.

Rule: heavy work is bounded server-wide, whatever the visitor keys: at most LARGE_PLACES
requests of large work (over LARGE_WORK multiply-adds by ``core.settings.cost``, priced from the
join's raw inputs; each holds a place in its lane while it waits for the large lane, ``ui.launch``)
and at most RUN_PLACES sweeps and training runs (the heavy lane) queued or running at once; one
more is refused where it joins (``CrowdMiddleware``, inside ``ui.fair_use``'s door, which then
frees the visitor's heavy place) with LARGE_REFUSAL or RUN_REFUSAL (HTTP 429). Both are more
than one visitor's share, so no single visitor takes them all; LARGE_PLACES is fewer than a
lane's places, so a small request always finds one; and with the shares they keep Gradio's
queue far from its bound (a crowd of rotated keys once filled all 256 places and a small /step
got 503). The count is read from Gradio's queue, as the share's is, plus the joins past the
door not yet answered.
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

# Work (core.settings.cost's multiply-adds) above which a request takes the large lane
# (``ui.launch``): an eighth of the largest linear step (2^33), a few tens of milliseconds.
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
        self.joining: Counter[str | None] = Counter()  # joins past the door, per kind
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
        """ "run" in the heavy lane, "large" for other work over LARGE_WORK, else None."""
        if fn.concurrency_id == HEAVY_LANE:
            return "run"
        return "large" if self.work(fn, inputs) > LARGE_WORK else None

    def refusal(self, kind: str | None) -> str | None:
        """The refusal of one more event of ``kind`` beside the events queued or running in
        Gradio's queue (each priced once) and the joins past the door; None when it fits."""
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
