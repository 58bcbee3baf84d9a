"""How the page is served: a public Space that shares nothing but this page, with bounds.

Rules:
  bounds      uploads to MAX_FILE_SIZE, kept sessions to SESSION_CAPACITY, each visitor to a
              share of the queue and one heavy run, and the crowd to a few places of heavy
              work (``ui.fair_use``, ``ui.crowd``).
  lanes       a request whose work (``core.settings.cost``; a /step's with its compile when that
              reaches the first call's seconds, ``core.settings.compile_cost``) is over
              LARGE_WORK waits for the one large lane before Gradio processes it (``in_lane``,
              from ``ui.public.PublicBlocks``; a validator takes no lane);
              every lane but the heavy one takes LANE_SLOTS requests at once, more than one
              visitor's share, so another visitor's small request always finds a place and
              never waits behind large work. The heavy lane (sweeps and training runs) runs
              one at a time, and a session's own page events (private ones) one at a time, in
              the order the page sent them (``ui.session_order``); one still waiting there
              when a newer event of the same kind from the session comes is replaced by it
              (answered with a skip), so a session never piles up page events, and so is a
              commit (``carries_every_setting``) the page sent before one that already started.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable
from typing import Any

import gradio as gr
from starlette.middleware import Middleware

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
from playground.ui.upload_guard import disk_middleware
from playground.ui.upload_records import upload_records
from playground.ui.url_state import long_link_middleware
from playground.ui.warm_up import TrafficMiddleware

# Uploads: the largest file the page needs (user data, at most 1 MB of CSV) with room to spare.
MAX_FILE_SIZE = "2mb"
# Sessions whose state Gradio keeps (oldest dropped first); each holds a copy of the page's
# outputs, about 0.2 MB, so this bounds that memory near 40 MB.
SESSION_CAPACITY = 200


def launch_kwargs(demo: gr.Blocks) -> dict[str, Any]:
    """Options for ``demo.launch``: a public Space that shares nothing but this page.

    Bounded: uploads to MAX_FILE_SIZE, kept sessions to SESSION_CAPACITY, a share of the queue
    and one heavy run per visitor, a few places of heavy work for everyone
    (``ui.fair_use.HeavyRunMiddleware`` and ``ui.crowd.CrowdMiddleware``, which read the events
    and the queue from ``demo``; the crowd's prices them with ``event_work``).
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
                upload_records(),  # which visitor uploaded which file
                Middleware(ClientRefusals, blocks=demo),  # a refused join, told to gradio_client
                Middleware(HeavyRunMiddleware, blocks=demo),
                Middleware(CrowdMiddleware, blocks=demo, work=event_work),  # inside the share's
            ]
        },
    }


def queue_kwargs() -> dict[str, Any]:
    """The queue's bound and the default lane: LANE_SLOTS requests at once (each event that
    declares its own lane declares the same, but for the heavy one).

    The bound is generous because no visitor can hold more than its share of it
    (``ui.fair_use``): it only stops a crowd, never one visitor's flood. What the queue records
    per finished event stays bounded too (``ui.queue_records``).
    """
    bound_analytics()
    return {"max_size": 256, "default_concurrency_limit": LANE_SLOTS}


LARGE_LANE: asyncio.Lock | None = None  # made in the server's event loop, on first use
# One lock per session with a page event running or waiting; dropped when none holds it.
SESSION_LANES: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()
# The newest ticket of each (session, event) waiting or running: an older one still waiting
# when a newer one came is replaced by it.
NEWEST: dict[tuple[str, int], int] = {}


def event_work(fn: Any, inputs: list[Any]) -> float:
    """The work (``core.settings.cost``) of running ``fn`` on these raw inputs (a /step's with its
    long
    compile, ``core.settings.compile_cost.first_call_work``): the settings among them (each input
    component's elem_id is its field), priced as the endpoint computes them; 0 when they are no
    valid settings (the handler then refuses them before any compute)."""
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
    """``call()`` in ``fn``'s lane (see the module rule): after the session's earlier page
    events when ``fn`` is a private one (``replaced()`` instead, the call answering a skip,
    when a newer event of the same kind from the session came meanwhile), and after the large
    lane when its work on ``inputs`` is over LARGE_WORK."""
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
