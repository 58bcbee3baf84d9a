"""A session's page events start in the order they were sent (ui.session_order).

Through ``ui.launch.in_lane``, the lane every page event passes: an older event whose handler
Gradio starts after a newer one's still runs first; an event that never starts holds the
others up at most WAIT seconds; another session is never held up.
"""

from __future__ import annotations

import asyncio
import itertools
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

from playground.ui import session_order
from playground.ui.arguments import STEP
from playground.ui.launch import in_lane


def _page_event(kind: int) -> SimpleNamespace:
    return SimpleNamespace(
        concurrency_id="page", api_visibility="private", _id=kind, inputs=[], api_name=None
    )


# A held-up event waits session_order.WAIT; the tests that check nobody is held up set it to an
# hour, so a hold-up fails them at RESULT_TIMEOUT on any machine, not by a measured time.
AN_HOUR = 3600.0
RESULT_TIMEOUT = 120.0


def _run(coroutine):
    """In a thread of its own: the browser tests' Playwright may hold this thread's loop."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result(timeout=RESULT_TIMEOUT)


async def _events(starts: list[tuple[str, int, float]], ran: list[int]) -> None:
    async def one(session: str, kind: int, delay: float) -> None:
        await asyncio.sleep(delay)

        async def handler() -> None:
            ran.append(kind)
            await asyncio.sleep(0.01)

        async def replaced() -> None:
            ran.append(-kind)  # answered as a skip: a newer event of its kind came

        await in_lane(_page_event(kind), [], handler, session, replaced)

    await asyncio.gather(*(one(*start) for start in starts))


def test_an_older_event_started_late_still_runs_first():
    session_order.arrived("s1", 6)  # the commit of a blurred box ...
    session_order.arrived("s1", 8)  # ... then a slider's refused value
    ran: list[int] = []
    # Gradio starts the newer one first.
    _run(_events([("s1", 8, 0.0), ("s1", 6, 0.05)], ran))
    assert ran == [6, 8]


def test_an_event_that_never_starts_holds_its_session_up_only_briefly(monkeypatch):
    monkeypatch.setattr(session_order, "WAIT", 0.2)
    session_order.arrived("s2", 1)  # dropped by Gradio before its handler: never starts
    session_order.arrived("s2", 2)
    ran: list[int] = []
    _run(_events([("s2", 2, 0.0)], ran))
    assert ran == [2]


def test_another_session_is_not_held_up(monkeypatch):
    monkeypatch.setattr(session_order, "WAIT", AN_HOUR)
    session_order.arrived("s3", 1)  # s3's older event has not started
    session_order.arrived("s4", 1)
    ran: list[int] = []
    _run(_events([("s4", 1, 0.0)], ran))
    assert ran == [1]
    session_order.take("s3", 1)
    session_order.started("s3")


def test_a_replaced_event_gives_its_number_up(monkeypatch):
    monkeypatch.setattr(session_order, "WAIT", AN_HOUR)
    session_order.arrived("s5", 3)
    session_order.dropped("s5", 3)  # replaced at the door by a newer one of its kind
    session_order.arrived("s5", 3)
    ran: list[int] = []
    _run(_events([("s5", 3, 0.0)], ran))
    assert ran == [3]


def test_sessions_that_left_are_forgotten(monkeypatch):
    monkeypatch.setattr(session_order, "SESSIONS_KEPT", 2)
    monkeypatch.setattr(session_order, "_PENDING", {})
    for session in ("gone-1", "gone-2", "gone-3"):
        session_order.arrived(session, 1)  # never start
    monkeypatch.setattr(session_order, "FORGET", 0.0)
    session_order.arrived("new", 1)
    assert list(session_order._PENDING) == ["new"]


def _commit_event(kind: int) -> SimpleNamespace:
    """A page commit: its inputs are every setting's control (each elem_id its field)."""
    controls = [SimpleNamespace(elem_id=name) for name in STEP.fields]
    return SimpleNamespace(
        concurrency_id="page", api_visibility="private", _id=kind, inputs=controls, api_name=None
    )


async def _in_turn(event: SimpleNamespace, session: str, ran: list[int]) -> None:
    async def handler() -> None:
        ran.append(event._id)

    async def replaced() -> None:
        ran.append(-event._id)

    await in_lane(event, [], handler, session, replaced)


def test_the_pages_own_numbers_order_events_that_reach_the_server_the_other_way_round():
    # The page sent the box's commit (kind 6) first and the slider's (kind 8) second; the
    # slider's reached the door first.
    session_order.arrived("p1", 8, sent=2)
    session_order.arrived("p1", 6, sent=1)
    ran: list[int] = []
    _run(_events([("p1", 8, 0.0), ("p1", 6, 0.05)], ran))
    assert ran == [6, 8]


def test_a_commit_sent_before_one_that_already_ran_is_skipped_and_other_events_still_run():
    ran: list[int] = []

    async def late_arrivals() -> None:
        session_order.arrived("p2", 8, sent=5)  # the newer commit arrives and runs ...
        await _in_turn(_commit_event(8), "p2", ran)
        session_order.arrived("p2", 6, sent=4)  # ... before the older commit even arrives
        await _in_turn(_commit_event(6), "p2", ran)
        session_order.arrived("p2", 3, sent=3)  # an older event that is no commit still runs
        await _in_turn(_page_event(3), "p2", ran)
        session_order.arrived("p2", 6, sent=6)  # and a newer commit runs
        await _in_turn(_commit_event(6), "p2", ran)

    _run(late_arrivals())
    assert ran == [8, -6, 3, 6]


def test_events_the_page_did_not_number_are_never_skipped_as_superseded():
    ran: list[int] = []

    async def arrivals() -> None:
        session_order.arrived("p3", 8, sent=9)
        await _in_turn(_commit_event(8), "p3", ran)
        session_order.arrived("p3", 6)  # a raw join: numbered by its arrival
        await _in_turn(_commit_event(6), "p3", ran)

    _run(arrivals())
    assert ran == [8, 6]


def test_the_pages_numbers_and_the_servers_never_order_each_other(monkeypatch):
    # A commit numbered by the page (its box's number) that has not started yet does not hold
    # up an event numbered by its arrival (a chart's), nor the other way round: the two counts
    # start from different origins.
    monkeypatch.setattr(session_order, "WAIT", AN_HOUR)
    monkeypatch.setattr(session_order, "_counter", itertools.count(1000))  # a server that ran
    session_order.arrived("p4", 6, sent=1)  # never starts
    session_order.arrived("p4", 3)  # 1000
    ran: list[int] = []
    _run(_events([("p4", 3, 0.0)], ran))
    session_order.take("p4", 6)
    session_order.arrived("p4", 5)  # 1001, never starts
    session_order.arrived("p4", 8, sent=2000)
    _run(_events([("p4", 8, 0.0)], ran))
    assert ran == [3, 8]
    session_order.take("p4", 5)
    session_order.started("p4")
