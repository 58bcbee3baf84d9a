"""The queue's records of finished events stay bounded (playground.ui.queue_records).

Against Gradio's own queue in a launched server: many raw API calls (each a session of its own)
leave at most a bound of recorded sessions, and every call still reads its result, which Gradio
looks up in those records; a session with an event still waiting is never forgotten.
"""

from __future__ import annotations

import socket
from types import SimpleNamespace

import gradio as gr
import httpx
import pytest
from starlette.middleware import Middleware

from http_calls import attempt, visitor
from playground.ui import queue_records
from playground.ui.fair_use import HeavyRunMiddleware
from playground.ui.queue_records import forget_finished

CALLS, KEPT = 60, 8


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def echo_server(monkeypatch):
    """A small Gradio app behind the playground's door middleware, launched in this process."""
    monkeypatch.setattr(queue_records, "RECORDS_KEPT", KEPT)
    with gr.Blocks() as demo:
        number = gr.Number()
        doubled = gr.Number()
        gr.Button().click(lambda x: 2 * x, number, doubled, api_name="double")
    demo.queue(max_size=64)
    port = _free_port()
    demo.launch(
        server_name="127.0.0.1",
        server_port=port,
        prevent_thread_lock=True,
        app_kwargs={"middleware": [Middleware(HeavyRunMiddleware, blocks=demo)]},
    )
    try:
        yield demo, f"http://127.0.0.1:{port}/"
    finally:
        demo.close()


def test_many_calls_leave_a_bounded_record_and_every_result_is_read(echo_server):
    demo, url = echo_server
    answers = []
    with httpx.Client(timeout=30) as http:
        for i in range(CALLS):
            answers.append(attempt(url, "double", [i], visitor(f"192.0.2.{1 + i % 4}"), http))
    assert [a.kind for a in answers] == ["complete"] * CALLS
    assert [a.payload[0] for a in answers] == [2 * i for i in range(CALLS)]
    records = demo._queue.pending_event_ids_session
    # Without the bound Gradio keeps one record per call (CALLS of them).
    assert len(records) <= KEPT + 1


class _Messages:
    def __init__(self, waiting: int):
        self.waiting = waiting

    def empty(self) -> bool:
        return not self.waiting


def test_only_sessions_that_are_done_are_forgotten(monkeypatch):
    monkeypatch.setattr(queue_records, "RECORDS_KEPT", 2)
    queue = SimpleNamespace(
        pending_event_ids_session={
            "done": {"a"},
            "running": {"b", "c"},
            "unread": {"d"},
            "evicted": {"e"},
        },
        event_ids_to_events={"c": object()},
        pending_messages_per_session={
            "done": _Messages(0),
            "running": _Messages(0),
            "unread": _Messages(1),
        },
    )
    assert forget_finished(queue) == 2
    assert set(queue.pending_event_ids_session) == {"running", "unread"}
    # At or under the bound nothing is scanned or dropped.
    assert forget_finished(queue) == 0


def test_analytics_are_bounded_unless_the_operator_chose(monkeypatch):
    monkeypatch.delenv("GRADIO_ANALYTICS_MAX_EVENTS", raising=False)
    queue_records.bound_analytics()
    queue = gr.Blocks().queue()._queue
    assert queue.ANALYTICS_MAX_EVENTS == queue_records.ANALYTICS_KEPT
    monkeypatch.setenv("GRADIO_ANALYTICS_MAX_EVENTS", "77")
    queue_records.bound_analytics()
    assert gr.Blocks().queue()._queue.ANALYTICS_MAX_EVENTS == 77
