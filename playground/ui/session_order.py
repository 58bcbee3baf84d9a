"""A session's page events start in the order they reached the server.

Rule: the door (``ui.fair_use``) numbers each private page event of a session as it is let in
(``arrived``). Before its session's lane, a page event takes the oldest number of its kind
(``take``) and waits until every event of its session with a smaller number has started
(``wait_turn``); it starts by taking the session's lane lock, which is first come, first served,
and says so (``started``). Gradio may start two of a session's events in either order (both
wait in a lane of several places), and an older commit that ran after a newer, refused one
answered with the older values and hid the newer one's notice. An event that never starts
(dropped before its handler) holds the others up at most WAIT seconds, and a number is forgotten
after FORGET seconds; an event replaced at the door gives its number up (``dropped``).
"""

from __future__ import annotations

import asyncio
import itertools
import time

# Seconds an event waits at most for an earlier one of its session to start: long enough for a
# busy 2-vCPU server (at 2 s, a preset clicked right after a commit timed out once in a browser
# test under a load average of 6-10, as if the two had run out of order).
WAIT = 8.0
FORGET = 60.0  # seconds after which a number that never started is forgotten
POLL = 0.005
SESSIONS_KEPT = 1024  # sessions with waiting numbers before old ones are swept

_counter = itertools.count(1)
# session -> [(number, event kind, arrival time)], in arrival order, not yet started.
_PENDING: dict[str, list[tuple[int, int, float]]] = {}


def arrived(session: str, kind: int) -> None:
    """Number a page event of ``kind`` (its function's id) of ``session`` as it is let in;
    past SESSIONS_KEPT sessions, those whose numbers are all older than FORGET are dropped
    (a session that left with an event that never started comes back no more)."""
    now = time.monotonic()
    if len(_PENDING) > SESSIONS_KEPT:
        for stale in [key for key, entries in _PENDING.items() if _forgotten(entries, now)]:
            del _PENDING[stale]
    kept = [entry for entry in _PENDING.get(session, []) if now - entry[2] < FORGET]
    _PENDING[session] = [*kept, (next(_counter), kind, now)]


def _forgotten(entries: list[tuple[int, int, float]], now: float) -> bool:
    return all(now - arrival >= FORGET for _, _, arrival in entries)


def dropped(session: str, kind: int) -> None:
    """A still-queued event of ``kind`` was replaced at the door: its number will never start."""
    take(session, kind)


def take(session: str, kind: int) -> int | None:
    """The oldest waiting number of ``kind`` in ``session`` (None if it has none), given up."""
    entries = _PENDING.get(session, [])
    for index, (number, entry_kind, _) in enumerate(entries):
        if entry_kind == kind:
            del entries[index]
            return number
    return None


async def wait_turn(session: str, number: int | None) -> None:
    """Wait until no event of ``session`` numbered before ``number`` is still waiting to start
    (at most WAIT seconds)."""
    if number is None:
        return
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and any(
        earlier < number for earlier, _, _ in _PENDING.get(session, [])
    ):
        await asyncio.sleep(POLL)


def started(session: str) -> None:
    """Forget ``session`` once none of its events waits to start."""
    if not _PENDING.get(session, True):
        del _PENDING[session]
