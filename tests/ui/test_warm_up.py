"""The start-up warm-up (ui.warm_up): it runs every request it lists, can be turned off, and
yields to visitors: each request waits for QUIET seconds without a visitor's request (one in
flight over HTTP, event streams excepted, or an event in Gradio's queue)."""

from __future__ import annotations

import asyncio
import collections
import os
import threading
import time
from types import SimpleNamespace

from playground.core.model.models import MODELS
from playground.core.recipes.registry import COMPUTE_DTYPES
from playground.core.runs.sweep import _curves_over_scales
from playground.core.runs.train import _three_runs
from playground.core.settings.settings import StepConfig
from playground.core.step import compiled
from playground.core.step.report import _both_steps, run_report
from playground.ui import launch, warm_up


def test_the_warm_up_covers_every_default_combination_and_runs_them(monkeypatch):
    listed = warm_up.requests()
    # the page's own step, then the route's runs; every endpoint x model x recipe once, at the
    # page's defaults otherwise; then the comparison of every recipe at the defaults
    assert listed[-1] == ("compare", StepConfig())
    route = [request for request in warm_up.route_requests() if request != listed[0]]
    assert listed[1 : 1 + len(route)] == route
    listed = [listed[0], *listed[1 + len(route) : -1]]
    combinations = [(kind, c.model, c.compute_dtype) for kind, c in listed]
    expected = {
        (k, m, d) for k in ("step", "dynamics", "sweep") for m in MODELS for d in COMPUTE_DTYPES
    }
    assert len(combinations) == len(expected) and set(combinations) == expected
    assert combinations[0] == ("step", "linear", "bfloat16")
    page = StepConfig()
    assert all(
        c.replace(model=page.model, compute_dtype=page.compute_dtype) == page for _, c in listed
    )
    # the thread runs each listed request (here one of each kind, at a small shape: every
    # default combination is accepted: tests/core/settings/test_compile_cost.py)
    each_kind = listed[:: len(listed) // 3]
    small = [(kind, config.replace(n=8, d_in=4, d_out=2, steps=2)) for kind, config in each_kind]
    monkeypatch.setattr(warm_up, "requests", lambda: small)
    ran = []
    real = warm_up.run
    monkeypatch.setattr(warm_up, "run", lambda kind, config: ran.append(real(kind, config)))
    # their programs are pinned: kept apart from visitors' (empty tables, at most 2 visitors')
    monkeypatch.setattr(compiled, "_table", collections.OrderedDict())
    monkeypatch.setattr(compiled, "_pinned", {})
    monkeypatch.setattr(compiled, "MAX_PROGRAMS", 2)
    thread = warm_up.start(grace=0)
    thread.join(timeout=300)
    assert not thread.is_alive() and len(ran) == len(small) == 3
    pinned = compiled.kept_pinned()
    assert compiled.kept() == []
    assert {_both_steps, _three_runs, _curves_over_scales} <= {program for program, *_ in pinned}
    # a visitor's new shapes evict only visitors' programs
    for n in range(9, 13):
        run_report(small[0][1].replace(n=n))
    assert compiled.kept_pinned() == pinned
    assert len(compiled.kept()) == 2


def test_a_failing_request_leaves_the_others_running(monkeypatch):
    ran = []

    def run(kind, config):
        ran.append(kind)
        if len(ran) == 1:
            raise RuntimeError("compile failed")

    monkeypatch.setattr(warm_up, "run", run)
    warm_up.start(grace=0).join(timeout=10)
    assert len(ran) == len(warm_up.requests())


def test_it_is_off_when_asked(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_WARM_UP", "0")
    assert warm_up.start(grace=0) is None


class ScriptedTraffic:
    """Traffic whose quiet time follows a script (then stays quiet); logs every answer."""

    def __init__(self, answers: list[float], log: list):
        self.answers, self.log = iter(answers), log

    def quiet_for(self) -> float:
        value = next(self.answers, 60.0)
        self.log.append(("quiet", value))
        return value


def test_each_warm_up_request_waits_for_a_quiet_server(monkeypatch):
    log: list = []
    monkeypatch.setattr(warm_up, "run", lambda kind, config: log.append(("run", kind)))
    q = warm_up.QUIET
    # a visitor comes before the second request, and twice more before the third
    script = [60.0, 0.0, q / 2, q * 0.99, q, 0.0, 0.0, q / 4, q * 2]
    warm_up._warm(ScriptedTraffic(script, log))
    runs = [index for index, (what, _) in enumerate(log) if what == "run"]
    assert len(runs) == len(warm_up.requests())
    for index in runs:  # every request right after a quiet answer of at least QUIET
        assert log[index - 1][0] == "quiet" and log[index - 1][1] >= q, log[: index + 1]
    for index, (what, value) in enumerate(log[:-1]):  # a busy answer is asked again, never run
        if what == "quiet" and value < q:
            assert log[index + 1][0] == "quiet", log[: index + 2]
    assert [value for what, value in log if what == "quiet"][: len(script)] == script


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def _through(middleware, method: str, path: str, during) -> None:
    async def app(scope, receive, send):
        during.append(middleware.traffic.busy())

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        pass

    scope = {"type": "http", "method": method, "path": path}
    await warm_up.TrafficMiddleware(app, middleware.traffic)(scope, receive, send)


def _run(coroutine) -> None:
    """Run ``coroutine`` to its end in a thread of its own: this worker's thread may hold a
    running event loop already (Playwright's sync API keeps one), where asyncio.run refuses."""
    errors: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(coroutine)
        except BaseException as error:  # re-raised in the test's thread
            errors.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


def test_a_request_in_flight_is_traffic_and_an_event_stream_is_not():
    clock = Clock()
    traffic = warm_up.Traffic(clock=clock)
    assert traffic.quiet_for() == float("inf")  # no visitor yet: the warm-up starts at once
    holder = warm_up.TrafficMiddleware(None, traffic)
    during: list[bool] = []
    _run(_through(holder, "GET", "/gradio_api/queue/data", during))
    assert during == [False] and traffic.quiet_for() == float("inf")
    _run(_through(holder, "POST", "/gradio_api/queue/join", during))
    _run(_through(holder, "GET", "/assets/index.js", during))
    assert during == [False, True, True] and not traffic.busy()
    clock.now += 1.5
    assert traffic.quiet_for() == 1.5  # since the last request ended


def test_an_event_running_is_traffic():
    clock = Clock()
    traffic = warm_up.Traffic(clock=clock)
    assert not traffic.busy()
    with traffic.running():
        clock.now += 5.0
        assert traffic.busy() and traffic.quiet_for() == 0.0
    clock.now += 0.5
    assert not traffic.busy() and traffic.quiet_for() == 0.5


def test_every_event_the_lanes_schedule_runs_as_traffic():
    seen = []

    async def call():
        seen.append(launch.TRAFFIC.busy())
        return "done"

    async def skip():
        return "skipped"

    fn = SimpleNamespace(api_visibility="public", api_name="step", fn=None, inputs=[])
    answers = []

    async def scheduled():
        answers.append(await launch.in_lane(fn, [], call, None, skip))

    assert not launch.TRAFFIC.busy()
    _run(scheduled())
    assert answers == ["done"] and seen == [True] and not launch.TRAFFIC.busy()


def test_the_page_s_own_step_runs_before_start_returns_and_the_thread_at_the_lowest_priority(
    monkeypatch,
):
    """The first request (the page's own step) runs in the caller, at its priority, before
    ``start`` returns (before the server serves); every other one in the thread, at nice 19."""
    seen = []

    def run(kind, config):
        thread = threading.current_thread().name
        seen.append(
            (kind, config, thread, os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        )

    monkeypatch.setattr(warm_up, "run", run)
    own = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert own < 19
    thread = warm_up.start(traffic=warm_up.Traffic(), grace=0)
    listed = warm_up.requests()
    assert seen[0] == (*listed[0], threading.current_thread().name, own)
    thread.join(timeout=10)
    assert [(kind, config) for kind, config, *_ in seen] == listed
    assert all(name == "warm-up" and nice == 19 for *_, name, nice in seen[1:])
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == own  # this thread's own


def test_the_thread_waits_its_grace_before_its_first_request(monkeypatch):
    """A visitor who wakes the server has the first page to itself: nothing after the page's
    own step runs before the grace has passed."""
    times = []
    monkeypatch.setattr(warm_up, "run", lambda kind, config: times.append(time.monotonic()))
    listed = warm_up.requests()[:3]
    monkeypatch.setattr(warm_up, "requests", lambda: listed)
    began = time.monotonic()
    thread = warm_up.start(traffic=warm_up.Traffic(), grace=0.5)
    assert len(times) == 1  # the page's own step, run in start before it returns
    thread.join(timeout=10)
    assert len(times) == 3 and times[1] - began >= 0.5


def test_the_route_is_warmed_in_chapter_order_with_every_chapters_view(monkeypatch):
    """Each chapter's opening step (its lesson's settings, or a training lesson's step part),
    then the chapter's view (every run it reads, its claims and picture: ``ui.route.view``),
    in the route's order, each step once where first needed."""
    from playground.core.lessons.route import ROUTE
    from playground.ui.route import step_lesson

    expected = []
    for index, chapter in enumerate(ROUTE):
        expected += [("step", step_lesson(chapter.lesson).config()), ("chapter", index)]
    once = []
    for request in expected:
        if request not in once:
            once.append(request)
    assert warm_up.route_requests() == once
    assert [config for kind, config in once if kind == "chapter"] == list(range(len(ROUTE)))
    viewed = []
    monkeypatch.setattr(warm_up.route, "view", viewed.append)
    warm_up.run("chapter", 3)
    assert viewed == [3]
