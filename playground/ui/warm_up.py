"""Warming the server's programs before the first users' requests.

Rule: at start, a background thread sends, through the same code as the page's events, the
page's own step, then the route's runs in chapter order (each chapter's step, its training runs
and the reports its picture reads: ``route_requests``), then one request of each combination a
user can pick without touching a number (every endpoint x model x recipe at the page's
defaults: the other steps, the training runs, the sweeps; then the comparison of every recipe
at the defaults, whose steps are compiled by then), then compiles the tensors tab's
quantizers, and ends. Their programs stay compiled (they run inside ``core.step.compiled``'s
``pinned()``, so visitors' new shapes never evict them; ``core.step.compile_cache`` saves them
on disk, so a restarted server reads them back), along with what every shape shares (scalar
casts, each recipe's statistics, the charts' code, lazily imported modules).
``PLAYGROUND_WARM_UP=0`` turns it off (the tests' servers, which share a small CPU with their
browsers).

Ready first: the page's own step (the first request) runs in ``start``, before the server
serves, at the caller's priority: a server is ready when the page it serves answers its first
request without compiling. The thread warms the rest after START_GRACE seconds, so a user who
woke the server has the first page to itself.

Yielding: users are served first. Before each of its requests the warm-up waits until no
user's request has been seen for QUIET seconds (``Traffic.quiet_for``): a request is seen
while it is in flight over HTTP (``TrafficMiddleware``; the event streams, which stay open while
a page is, do not count) and while an event is queued or running in Gradio's queue. So a
user's page load and commits meet at most the one warm-up request already compiling when
they came, and that one runs at the lowest CPU priority (``lowest_priority``: on Linux a
thread's nice value is its own), so the user's work takes the cores first.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from playground.core.lessons.route import ROUTE
from playground.core.model.models import MODELS
from playground.core.recipes.registry import COMPUTE_DTYPES
from playground.core.runs.sweep import run_sweep
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import StepConfig
from playground.core.step import compiled
from playground.core.tensors.report import warm_up as warm_tensors
from playground.ui import endpoints, route
from playground.ui.arguments import STEP
from playground.ui.route import step_lesson
from playground.ui.tabs.compare import COMPARE, run_compare

# Seconds without a user's request before the warm-up sends its next one: longer than the
# gaps inside a page load and between a user's commits.
QUIET = 2.0
# Seconds the thread waits before its first request, from the moment ``start`` returns: long
# enough for the server to start serving and for a user who wakes it (a Space's first user) to
# load the page and see its first chart before the warm-up traces anything. A lower CPU
# priority cannot put the user first while a warm-up request traces: tracing is Python, and
# the interpreter's lock takes no priorities.
START_GRACE = 6.0
POLL = 0.05  # seconds between looks at the traffic while waiting
# GET routes that stay open while a page is (Gradio's event streams and heartbeat).
STREAMS = ("/queue/data", "/heartbeat/", "/call/")


class Traffic:
    """Users' requests as the warm-up sees them: HTTP requests in flight (counted by
    ``TrafficMiddleware``) and the page's events running (``running``); changed in the
    server's event loop only."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.in_flight = 0
        self.last_seen = -float("inf")  # when a request was last in flight or running

    def busy(self) -> bool:
        """Whether a client's request is in flight or its event running."""
        return self.in_flight > 0

    @contextlib.contextmanager
    def running(self) -> Iterator[None]:
        """Count one event as traffic while the block runs."""
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1
            self.seen()

    def quiet_for(self) -> float:
        """Seconds since a client's request was last seen (0 while one is)."""
        now = self.clock()
        if self.busy():
            self.last_seen = now
        return now - self.last_seen

    def seen(self) -> None:
        self.last_seen = self.clock()


TRAFFIC = Traffic()


class TrafficMiddleware:
    """ASGI middleware counting the HTTP requests in flight into TRAFFIC (streams excepted)."""

    def __init__(self, app: Callable, traffic: Traffic = TRAFFIC):
        self.app, self.traffic = app, traffic

    async def __call__(
        self,
        scope: dict[str, Any],
        receive: Callable[[], Awaitable[dict[str, Any]]],
        send: Callable[[dict[str, Any]], Awaitable[None]],
    ) -> None:
        path = scope.get("path", "")
        stream = scope.get("method") == "GET" and any(part in path for part in STREAMS)
        if scope["type"] != "http" or stream:
            await self.app(scope, receive, send)
            return
        with self.traffic.running():
            await self.app(scope, receive, send)


def route_requests() -> list[tuple[str, Any]]:
    """What the route's chapters run, in the route's order: the step each chapter opens with
    (its lesson's settings, through the page's step), then the chapter's view (``chapter``,
    by its index: every run it reads, kept as the page keeps them, its claims with the runs
    they make themselves, and its picture)."""
    listed: list[tuple[str, Any]] = []
    for index, chapter in enumerate(ROUTE):
        listed.append(("step", step_lesson(chapter.lesson).config()))
        listed.append(("chapter", index))
    return list(dict.fromkeys(listed))  # each once, where it is first needed


def requests() -> list[tuple[str, Any]]:
    """(kind, config) of every warm-up request, in the order they run: the page's own step,
    then the route's runs in chapter order (a learner's Next meets compiled programs, chapter
    k + 1's ready while chapter k is read), then every endpoint x model x recipe at the
    defaults, then the comparison."""
    combinations = [
        StepConfig(model=model, compute_dtype=dtype) for model in MODELS for dtype in COMPUTE_DTYPES
    ]
    listed = [(kind, config) for kind in ("step", "dynamics", "sweep") for config in combinations]
    first, *rest = listed
    route = [request for request in route_requests() if request != first]
    return [first, *route, *rest, ("compare", StepConfig())]


def run(kind: str, config: Any) -> None:
    """One warm-up request of ``kind``: the step through its endpoint (views and charts), or a
    route's chapter view (``chapter``, ``config`` its index)."""
    if kind == "chapter":
        route.view(config)
        return
    values = config.to_dict() | {"data": None} | dict(COMPARE.appended)
    if kind == "step":
        endpoints.run_step(*[values[name] for name in STEP.order])
    elif kind == "compare":
        run_compare(*[values[name] for name in COMPARE.order])
    elif kind == "dynamics":
        run_dynamics(config)
    else:
        run_sweep(config)


DONE = "warm-up done"  # printed when the thread ends (the benches wait for it)


def wait_quiet(traffic: Traffic, quiet: float = QUIET, poll: float = POLL) -> None:
    """Return once no client's request has been seen for ``quiet`` seconds."""
    while traffic.quiet_for() < quiet:
        time.sleep(poll)


def lowest_priority() -> bool:
    """Run the calling thread at the lowest CPU priority (nice 19); True when the system took
    it (Linux sets a thread's own; elsewhere this may be the process's, or nothing)."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):
        return False
    return True


def _run_logged(kind: str, config: StepConfig) -> None:
    try:
        with compiled.pinned():
            run(kind, config)
    except Exception:  # a failed warm-up only leaves that program cold
        logging.getLogger(__name__).exception("warm-up %s failed", kind)


def _warm(traffic: Traffic, listed: list[tuple[str, StepConfig]] | None = None) -> None:
    """Each of ``listed`` (default: every request) once the server is quiet, then the
    tensors tab's quantizers."""
    began = time.perf_counter()
    for kind, config in requests() if listed is None else listed:
        wait_quiet(traffic)
        _run_logged(kind, config)
    warm_tensors()  # the block recipes' quantizers of the tensors tab: one program each
    pinned = len(compiled.kept_pinned())
    print(f"{DONE} in {time.perf_counter() - began:.1f} s ({pinned} programs pinned)", flush=True)


def start(traffic: Traffic = TRAFFIC, grace: float = START_GRACE) -> threading.Thread | None:
    """Run the page's own step, then start the warm-up thread for the other requests (see the
    rule), which waits ``grace`` seconds first and yields to ``traffic``; None when
    PLAYGROUND_WARM_UP is 0."""
    if os.environ.get("PLAYGROUND_WARM_UP", "1") == "0":
        return None
    first, *rest = requests()
    _run_logged(*first)

    def warm() -> None:
        lowest_priority()
        time.sleep(grace)
        _warm(traffic, rest)

    thread = threading.Thread(target=warm, name="warm-up", daemon=True)
    thread.start()
    return thread
