"""What Gradio's queue holds, read and changed where the app's rules need it.

Gradio (6.31) documents its queue's options (``demo.queue(...)``, an event's
``concurrency_id`` and ``concurrency_limit``) but not its contents; the fair share, the crowd's
places, a refusal told to gradio_client, the bounded records and the warm-up read them here:

  groups    ``Queue.event_queue_per_concurrency_id``: one entry per concurrency_id, each with
            its waiting events (``.queue``); ``Queue.active_jobs``: the running events, one
            list per worker (None when idle); ``len(queue)``: the waiting ones;
  an event  ``Event``: its ``_id``, its BlockFunction ``fn``, ``session_hash``, ``request``
            (the join's, with the client's headers) and ``data`` (the join's body; ``.data``
            its raw inputs);
  streams   ``pending_messages_per_session``: each session's messages not yet sent (an asyncio
            queue, guarded by ``pending_message_lock``); ``pending_event_ids_session``: each
            session's event ids; ``event_ids_to_events``: the events not yet finished;
            ``remove_from_queue(event_id)`` drops a waiting event; a ``ProcessCompletedMessage``
            ends an event on its session's stream.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from gradio.server_messages import ProcessCompletedMessage


def queue_of(blocks: Any) -> Any:
    """The queue of ``blocks`` (None before ``blocks.queue()``)."""
    return getattr(blocks, "_queue", None)


def queued(queue: Any) -> list[Any]:
    """The events in ``queue``: waiting in any concurrency group, then running."""
    waiting = [e for lane in queue.event_queue_per_concurrency_id.values() for e in lane.queue]
    return waiting + [event for job in queue.active_jobs if job for event in job]


def waiting_in_lane(queue: Any, concurrency_id: str) -> list[Any]:
    """The events waiting in the concurrency group ``concurrency_id``, in order."""
    lane = queue.event_queue_per_concurrency_id.get(concurrency_id)
    return list(lane.queue) if lane else []


def busy(queue: Any) -> bool:
    """Whether an event is waiting or running in ``queue`` (read from another thread: a change
    in the server's loop meanwhile counts as busy)."""
    try:
        return len(queue) > 0 or any(job for job in queue.active_jobs if job)
    except RuntimeError:
        return True


def event_id(event: Any) -> str:
    return event._id


def event_fn(event: Any) -> Any:
    """The event's BlockFunction (``events``)."""
    return event.fn


def event_session(event: Any) -> str | None:
    return event.session_hash


def event_request(event: Any) -> Any:
    """The request the event joined with (its ``headers`` and ``client``), or None."""
    return getattr(event, "request", None)


def event_inputs(event: Any) -> list[Any]:
    """The event's raw inputs, as its join sent them."""
    return event.data.data if event.data is not None else []


async def drop_waiting(queue: Any, event: Any) -> None:
    """Drop a waiting ``event`` and answer it as done with no output (as Gradio's /cancel
    answers), so its session's stream ends it."""
    await queue.remove_from_queue(event._id)
    session = event.session_hash
    if session in queue.pending_messages_per_session:
        done = ProcessCompletedMessage(output={}, success=True, event_id=event._id)
        queue.pending_messages_per_session[session].put_nowait(done)


async def end_on_stream(queue: Any, session: str, error: str, title: str) -> tuple[str, bool]:
    """Put an event that ended with ``error`` on ``session``'s stream, opening the stream when
    the session has none; (its new event id, whether the stream was opened)."""
    new_id = uuid.uuid4().hex
    async with queue.pending_message_lock:
        opened = session not in queue.pending_messages_per_session
        if opened:
            queue.pending_messages_per_session[session] = asyncio.Queue()
        queue.pending_event_ids_session.setdefault(session, set()).add(new_id)
        output = {"error": error, "title": title, "visible": True, "duration": None}
        queue.pending_messages_per_session[session].put_nowait(
            ProcessCompletedMessage(event_id=new_id, output=output, success=False, title=title)
        )
    return new_id, opened


def forget_stream(queue: Any, session: str, only: str) -> None:
    """Forget ``session``'s stream and records, if event ``only`` is all it still holds."""
    if queue.pending_event_ids_session.get(session, set()) <= {only}:
        queue.pending_event_ids_session.pop(session, None)
        queue.pending_messages_per_session.pop(session, None)


def recorded_sessions(queue: Any) -> int:
    """How many sessions the queue records event ids of (it never forgets one by itself)."""
    return len(queue.pending_event_ids_session)


def finished_sessions(queue: Any) -> list[str]:
    """The recorded sessions whose every event has finished and whose messages were all read."""
    live = queue.event_ids_to_events
    messages = queue.pending_messages_per_session
    return [
        session
        for session, ids in queue.pending_event_ids_session.items()
        if not any(event_id in live for event_id in ids)
        and (session not in messages or messages[session].empty())
    ]


def forget_sessions(queue: Any, sessions: list[str]) -> None:
    """Drop the records of ``sessions`` (each a recorded one)."""
    for session in sessions:
        del queue.pending_event_ids_session[session]
