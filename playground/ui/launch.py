"""How the page is served: a public Space that shares nothing but this page, with bounds.

Bounds: uploads to MAX_FILE_SIZE, Gradio's kept sessions to SESSION_CAPACITY, each client key
to a share of the queue and one heavy run (``ui.fair_use``), and all clients together to a few
large requests and heavy runs (``ui.crowd``).

Rule, for each call Gradio processes (``in_lane``, through ``ui.public.PublicBlocks.lane``; a
validator runs outside it)::

    concurrency  Gradio's concurrency groups (concurrency_id -> concurrency_limit):
                   the queue's default and the step's groups    LANE_SLOTS calls at once
                   "heavy" (the sweep and the training run)     one at a time
                   "tensors" (a file's analysis)                ``ui.tabs.tensors.CONCURRENCY``
    session      a private page event waits until its session's earlier page events have
                 started (``ui.session_order``), then takes the session's lock;
                 answered with a skip instead when
                   a newer event of the same kind from the session is waiting, or
                   it is a commit (``carries_every_setting``) sent before one that started
    large work   event_work(fn, inputs) > LARGE_WORK: runs under one server-wide lock
    call()

LANE_SLOTS is more than one client's share, so another client's small request always finds a
free slot and never waits behind large work; the skips keep a session from piling up page
events.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from playground.core.caps import TENSOR_FILE_MAX_BYTES
from playground.core.runs.sweep import sweep_exponents
from playground.core.settings.compile_cost import compare_first_call_work, first_call_work
from playground.core.settings.cost import compare_work, step_work
from playground.core.settings.settings import ConfigError, StepConfig, settings
from playground.ui import gathered_inputs, session_order
from playground.ui.arguments import STEP
from playground.ui.assets import CSS, JS
from playground.ui.client_refusals import ClientRefusals
from playground.ui.crowd import LARGE_WORK, CrowdMiddleware
from playground.ui.fair_use import LANE_SLOTS, HeavyRunMiddleware
from playground.ui.gradio_internals.events import event_kind
from playground.ui.queue_records import bound_analytics
from playground.ui.tabs.architecture import memory_event
from playground.ui.upload_guard import disk_middleware
from playground.ui.upload_records import upload_records
from playground.ui.url_state import long_link_middleware
from playground.ui.warm_up import TRAFFIC, TrafficMiddleware

# Uploads: the largest file the page reads, a safetensors file (``core.caps``); a CSV is
# refused past its own 1 MB before it is read.
MAX_FILE_SIZE = f"{TENSOR_FILE_MAX_BYTES // 2**20}mb"
# Sessions whose state Gradio keeps (oldest dropped first); each holds a copy of the page's
# outputs, about 0.2 MB, so this bounds that memory near 40 MB.
SESSION_CAPACITY = 200


def launch_kwargs(demo: gr.Blocks) -> dict[str, Any]:
    """Options for ``demo.launch``: a public Space that shares nothing but this page.

    The bounds of the module rule; ``ui.fair_use.HeavyRunMiddleware`` and
    ``ui.crowd.CrowdMiddleware`` read the events and the queue from ``demo``, and the crowd's
    prices each join with ``event_work``.

    Args:
        demo: the page, as ``ui.page`` builds it.

    Returns:
        Keyword arguments for ``demo.launch``.
    """
    return {
        "share": False,
        "show_error": True,
        "max_threads": 8,
        "max_file_size": MAX_FILE_SIZE,
        "state_session_capacity": SESSION_CAPACITY,
        "footer_links": ["api", "gradio"],
        "theme": gr.themes.Soft(),
        "css": CSS,
        "js": JS,
        "app_kwargs": {
            "middleware": [
                Middleware(TrafficMiddleware),  # what the warm-up yields to (``ui.warm_up``)
                long_link_middleware(),
                disk_middleware(),  # claims the app's folder on disk, then guards bodies, uploads
                upload_records(),  # which client key uploaded which file
                Middleware(ClientRefusals, blocks=demo),  # a refused join, told to gradio_client
                Middleware(HeavyRunMiddleware, blocks=demo),
                Middleware(CrowdMiddleware, blocks=demo, work=event_work),  # inside the share's
            ]
        },
    }


def queue_kwargs() -> dict[str, Any]:
    """Options for ``demo.queue``: its ``max_size`` and a default concurrency_limit of LANE_SLOTS.

    The step's concurrency groups declare the same limit (see the module rule). ``max_size`` is
    generous because no client key holds more than its share of it (``ui.fair_use``): it stops
    a crowd, never one client's flood. Also bounds what the queue records per finished event
    (``ui.queue_records``).
    """
    bound_analytics()
    return {"max_size": 256, "default_concurrency_limit": LANE_SLOTS}


# Large work's server-wide lock; made in the server's event loop, on first use.
LARGE_LANE: asyncio.Lock | None = None
# One lock per session with a page event running or waiting; dropped when none holds it.
SESSION_LANES: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
# The newest ticket of each (session, event) waiting or running: an older one still waiting
# when a newer one came is replaced by it.
NEWEST: dict[tuple[str, int], int] = {}


def event_work(fn: Any, inputs: list[Any]) -> float:
    """The work (``core.settings.cost``'s multiply-adds) of running ``fn`` on raw ``inputs``.

    Settings are read from the inputs whose component's elem_id names a field, then::

        sweep      step_work * (exponents swept) / 2
        dynamics   step_work * steps * 1.5
        compare    compare_work + compare_first_call_work
        a transformer's memory redraw (``ui.tabs.architecture``)   0: it counts, runs no step
        a step     step_work + first_call_work        (a long compile counts as work)
        otherwise  0   no valid settings: the handler refuses them before any compute
    """
    if getattr(fn, "fn", None) is memory_event:
        return 0.0
    table = settings()
    try:
        components, values = gathered_inputs.expanded(fn, inputs)
    except ConfigError:
        return 0.0  # a malformed box: refused before any compute
    fields = {
        component.elem_id: value
        for component, value in zip(components, values, strict=False)
        if getattr(component, "elem_id", None) in table
    }
    if fn.api_name not in ("sweep", "dynamics", "compare"):
        # A step: its own settings (a page commit also reads the training run's controls, for
        # the stale checks it answers, and they change no step's work).
        fields = {name: value for name, value in fields.items() if name in STEP.fields}
    if not fields:
        return 0.0
    try:
        config = StepConfig(**fields)
    except (ValueError, TypeError):
        return 0.0
    if fn.api_name == "sweep":
        return step_work(config) * sweep_exponents(config.compute_dtype).size / 2
    if fn.api_name == "dynamics":
        return step_work(config) * config.steps * 1.5
    if fn.api_name == "compare":  # every recipe's step, and their compiles
        return compare_work(config) + compare_first_call_work(config)
    return step_work(config) + first_call_work(config, "step")


def carries_every_setting(fn: Any) -> bool:
    """Whether the event's inputs hold every setting of the step (a page commit)."""
    fields = {getattr(component, "elem_id", None) for component in gathered_inputs.components(fn)}
    return set(STEP.fields) <= fields


async def in_lane(
    fn: Any,
    inputs: list[Any],
    call: Callable[[], Awaitable[Any]],
    session: str | None,
    replaced: Callable[[], Awaitable[Any]],
) -> Any:
    """Run ``call()`` as the module rule schedules it, or ``replaced()`` (a skip) instead; the
    warm-up yields to it meanwhile (``ui.warm_up.TRAFFIC``).

    Args:
        fn: Gradio's block function of the event.
        inputs: its raw inputs, priced by ``event_work``.
        call: Gradio's processing of the call.
        session: the session hash, or None for a call without one.
        replaced: answers the call with a skip.

    Returns:
        What ``call()`` or ``replaced()`` returned.
    """
    with TRAFFIC.running():
        if session and fn.api_visibility == "private":
            kind = event_kind(fn)
            turn = session_order.take(session, kind)
            await session_order.wait_turn(session, turn)
            key = (session, kind)
            NEWEST[key] = ticket = NEWEST.get(key, 0) + 1
            lock = SESSION_LANES.setdefault(session, asyncio.Lock())
            async with lock:
                session_order.started(session)
                if NEWEST.get(key) != ticket:  # a newer event of this kind waits: it replaces this
                    return await replaced()
                if carries_every_setting(fn):
                    if session_order.superseded(session, turn):  # a newer commit already ran
                        return await replaced()
                    session_order.commit_started(session, turn)
                try:
                    return await _sized(fn, inputs, call)
                finally:
                    if NEWEST.get(key) == ticket:
                        del NEWEST[key]
        return await _sized(fn, inputs, call)


async def _sized(fn: Any, inputs: list[Any], call: Callable[[], Awaitable[Any]]) -> Any:
    global LARGE_LANE
    if event_work(fn, inputs) <= LARGE_WORK:
        return await call()
    if LARGE_LANE is None:
        LARGE_LANE = asyncio.Lock()
    async with LARGE_LANE:
        return await call()
