"""A session's page events start in the order the page sent them.

Rule, per session and per private page event::

    arrived     the join middleware (``ui.fair_use``) numbers the event as it admits it: by the
                page's own number when the join carries one (a commit's gathered box holds it,
                ``ui.gathered_inputs.SENT``: the order the page gathered its commits in), else
                by the order of arrival
    take        before the session's lock, the event takes the oldest number of its kind
    wait_turn   it waits until every event of its session numbered the same way (both by the
                page, or both by arrival) with a smaller number has started
    started     it takes the session's lock (first come, first served) and says so
    superseded  a commit (an event that carries every setting's value) numbered before a
                commit of its session that has already started is answered with a skip: the
                newer one carries every value the older did (``commit_started`` records it)
    dropped     an event replaced before it started gives its number up

Why the page's own number: two commits the page sent a moment apart travel on two
connections and may reach the server in either order, and Gradio may start two of a session's
events in either order too (both wait in a concurrency group that runs several at once). A
number of the server's own could run a slider's refused value (sent second) before the
commit of the box left just before, hiding the refusal's notice. The page's number and the
server's count from different origins, so neither orders the other.

An event that never starts (dropped before its handler) holds the others up at most WAIT
seconds, and a number is forgotten after FORGET seconds.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import OrderedDict
from typing import NamedTuple

# Seconds an event waits at most for an earlier one of its session to start: long enough for a
# busy small server, where a shorter wait let a preset clicked right after a commit run first.
WAIT = 8.0
FORGET = 60.0  # seconds after which a number that never started is forgotten
POLL = 0.005
SESSIONS_KEPT = 1024  # sessions with waiting numbers before old ones are swept

_counter = itertools.count(1)


class Turn(NamedTuple):
    """An event's number in its session, and whether the page gave it (``sent``)."""

    number: int
    sent: bool


# session -> [(turn, event kind, arrival time)], in arrival order, not yet started.
_PENDING: dict[str, list[tuple[Turn, int, float]]] = {}
# session -> the page's number of its newest commit that started (up to SESSIONS_KEPT).
_NEWEST_COMMIT: OrderedDict[str, int] = OrderedDict()


def arrived(session: str, kind: int, sent: int | None = None) -> None:
    """Number a page event of ``kind`` (its function's id) of ``session`` as it is let in: by
    ``sent``, the page's number for it, when given; past SESSIONS_KEPT sessions, those whose
    numbers are all older than FORGET are dropped (a session that left with an event that
    never started comes back no more)."""
    now = time.monotonic()
    if len(_PENDING) > SESSIONS_KEPT:
        for stale in [key for key, entries in _PENDING.items() if _forgotten(entries, now)]:
            del _PENDING[stale]
    kept = [entry for entry in _PENDING.get(session, []) if now - entry[2] < FORGET]
    turn = Turn(sent, True) if sent is not None else Turn(next(_counter), False)
    _PENDING[session] = [*kept, (turn, kind, now)]


def _forgotten(entries: list[tuple[Turn, int, float]], now: float) -> bool:
    return all(now - arrival >= FORGET for _, _, arrival in entries)


def dropped(session: str, kind: int) -> None:
    """A still-queued event of ``kind`` was replaced by a newer one: its number will never
    start."""
    take(session, kind)


def take(session: str, kind: int) -> Turn | None:
    """The oldest waiting turn of ``kind`` in ``session`` (None if it has none), given up."""
    entries = _PENDING.get(session, [])
    for index, (turn, entry_kind, _) in enumerate(entries):
        if entry_kind == kind:
            del entries[index]
            return turn
    return None


async def wait_turn(session: str, turn: Turn | None) -> None:
    """Wait until no event of ``session`` numbered the same way and before ``turn`` is still
    waiting to start (at most WAIT seconds)."""
    if turn is None:
        return
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and any(
        earlier.sent == turn.sent and earlier.number < turn.number
        for earlier, _, _ in _PENDING.get(session, [])
    ):
        await asyncio.sleep(POLL)


def superseded(session: str, turn: Turn | None) -> bool:
    """Whether a commit of ``session`` that the page sent after this one has started."""
    newest = _NEWEST_COMMIT.get(session)
    return turn is not None and turn.sent and newest is not None and turn.number < newest


def commit_started(session: str, turn: Turn | None) -> None:
    """Record a commit of ``session`` that starts (the newest the page sent, see the rule)."""
    if turn is None or not turn.sent:
        return
    _NEWEST_COMMIT[session] = max(turn.number, _NEWEST_COMMIT.get(session, 0))
    _NEWEST_COMMIT.move_to_end(session)
    while len(_NEWEST_COMMIT) > SESSIONS_KEPT:
        _NEWEST_COMMIT.popitem(last=False)


def started(session: str) -> None:
    """Forget ``session`` once none of its events waits to start."""
    if not _PENDING.get(session, True):
        del _PENDING[session]
