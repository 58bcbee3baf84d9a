"""What Gradio's queue remembers about finished events, kept bounded on a public server.

Rule: Gradio (6.31) records, for every session, the ids of its events
(``Queue.pending_event_ids_session``) and never forgets a session whose events have all finished;
every raw API call is a session of its own, so a public Space would gain one record per call for
as long as it ran, its memory creeping up. Before each join,
once RECORDS_KEPT sessions are recorded, the sessions whose every event has finished and whose
messages have all been delivered are forgotten. A finished event's record is needed only until
its completion message is read (``GET /call/<api>/<event_id>`` looks its session up there), so
a record with a message still waiting is kept.

Gradio's own analytics keep one record per event, up to ``GRADIO_ANALYTICS_MAX_EVENTS``
(10,000 by default); ``bound_analytics`` lowers that default to ANALYTICS_KEPT before the queue
is made, leaving an operator's own setting alone.
"""

from __future__ import annotations

import os
from typing import Any

from playground.ui.gradio_internals import queue as gradio_queue

RECORDS_KEPT = 512
ANALYTICS_KEPT = 1000


def bound_analytics() -> None:
    """Keep at most ANALYTICS_KEPT per-event analytics records (unless the operator chose)."""
    os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", str(ANALYTICS_KEPT))


def forget_finished(queue: Any) -> int:
    """Forget the recorded sessions of ``queue`` that are done (see the module rule) once more
    than RECORDS_KEPT are recorded; the number forgotten."""
    if gradio_queue.recorded_sessions(queue) <= RECORDS_KEPT:
        return 0
    done = gradio_queue.finished_sessions(queue)
    gradio_queue.forget_sessions(queue, done)
    return len(done)
