"""The limits a public Space needs, checked against the launched app over raw HTTP.

A visitor is the connection's peer address (PLAYGROUND_TRUSTED_PROXIES is 0 off a Space), which
uvicorn takes from the right-hand X-Forwarded-For entry of a request from 127.0.0.1, where the
tests run; tests/app/test_fair_share.py checks the key behind trusted proxies. Every address
here is a documentation address (RFC 5737: 192.0.2.x, 198.51.100.x); all traffic goes to the
app on 127.0.0.1, in bounded loops.

  (a) one heavy run (sweep or dynamics) in flight per visitor: a second heavy request sent by
      the same visitor while the first is queued or running is refused with a message that
      contains "one heavy run at a time"; another visitor is not affected, and the first
      visitor may run again once the first run has finished;
  (b) isolation: while visitor A floods /dynamics (FLOOD concurrent requests at a moderate
      size), visitor B's /step calls at the default shape are each answered, none with HTTP
      503 (how fast depends on the machine: ``python bench/bench_load.py`` prints it against
      its 3 s target, row "flood");
  (c) uploads: a 3 MB file is refused (HTTP 413 or another 4xx), a 100 kB file is accepted;
  (d) bodies: a body of MAX_BODY_BYTES is taken and one byte more refused with HTTP 413 naming
      the cap, with a Content-Length or streamed without one; while BODIES bodies of 100 MB are
      sent at once (half of them streamed), each is refused before it is read whole, another
      visitor's /step calls are each answered, and the server's RSS (psutil,
      sampled every 20 ms) stays within RSS_ROOM_MB of its start.
"""

from __future__ import annotations

import threading
import time

import httpx
import psutil
import pytest

from http_calls import (
    DEFAULT_STEP,
    TIMEOUT,
    Answer,
    attempt,
    call,
    request_body,
    send_body,
    visitor,
)
from playground.core.settings.settings import StepConfig
from playground.ui.upload_guard import MAX_BODY_BYTES

pytestmark = pytest.mark.slow

HEAVY_REFUSAL = "one heavy run at a time"
MEDIUM = [0, 1024, 256, 128, 0.1, 1024.0, 0, 1.0, 1.0, "bfloat16"]
# The longest run the cost model accepts at this shape (595 steps: its warm cap):
# about 2 s warm on 2 idle vCPUs (100 steps took 0.3 s here), long enough to overlap a second
# request sent 0.5 s later, short enough to flood.
DYNAMICS = [*MEDIUM, StepConfig(n=1024, d_in=256, d_out=128).max_steps, "static", 100]
SWEEP = MEDIUM
FLOOD = 6
B_MIN_CALLS = 5
B_MAX_CALLS = 60
FLOOD_DEADLINE = 150.0  # the flood test gives up (and fails) after this long
BODY_BYTES = 100 * 2**20
BODIES = 4
RSS_ROOM_MB = 200
CAP_TEXT = f"capped at {MAX_BODY_BYTES // 2**10} kB"


def describe(answer: Answer) -> str:
    return f"{answer.kind} (HTTP {answer.status}, {answer.seconds:.2f} s) {answer.message[:200]}"


@pytest.fixture(scope="module")
def warm(app_url: str) -> str:
    """Compile the shapes used here once, so the timings below are warm."""
    who = visitor("198.51.100.99")
    for api, data in (("step", DEFAULT_STEP), ("dynamics", DYNAMICS), ("sweep", SWEEP)):
        answer = call(app_url, api, data, who)
        assert answer.kind == "complete", f"warm-up /{api}: {describe(answer)}"
    return app_url


def _second_while_first_runs(url: str, first_headers, second_api: str, second_headers):
    """Start a /dynamics run and send a second heavy request while it is in flight.

    Returns (the first run's answer, the second answer, whether the first run was still in
    flight when the second request was sent).
    """
    first: list[Answer] = []
    finished = threading.Event()

    def run_first() -> None:
        first.append(call(url, "dynamics", DYNAMICS, first_headers))
        finished.set()

    thread = threading.Thread(target=run_first, daemon=True)
    thread.start()
    time.sleep(0.5)  # queued or running by now
    in_flight = not finished.is_set()
    second = call(url, second_api, DYNAMICS if second_api == "dynamics" else SWEEP, second_headers)
    thread.join(timeout=TIMEOUT)
    assert first, "the first heavy request did not return"
    return first[0], second, in_flight


@pytest.mark.parametrize("second_api", ["dynamics", "sweep"])
def test_a_second_heavy_run_from_the_same_visitor_is_refused(warm, second_api):
    who = visitor("192.0.2.21")
    first, second, in_flight = _second_while_first_runs(warm, who, second_api, who)
    assert in_flight, f"the first run ended before the second was sent: {describe(first)}"
    assert first.kind == "complete", f"the first run did not complete: {describe(first)}"
    assert second.kind != "complete", (
        f"a second heavy /{second_api} sent by the same visitor while the first was in flight "
        f"ran to completion ({second.seconds:.1f} s)"
    )
    assert second.status != 503, f"refused as a full queue, not per visitor: {describe(second)}"
    assert HEAVY_REFUSAL in second.message, describe(second)
    # Once the first run is over, the same visitor may run again.
    time.sleep(0.2)
    again = call(warm, second_api, DYNAMICS if second_api == "dynamics" else SWEEP, who)
    assert again.kind == "complete", f"after the first run finished: {describe(again)}"


def test_the_visitor_is_the_address_the_proxy_wrote(warm):
    first_headers = visitor("192.0.2.23, 198.51.100.23")
    second_headers = visitor("192.0.2.24, 198.51.100.23")
    first, second, in_flight = _second_while_first_runs(
        warm, first_headers, "dynamics", second_headers
    )
    assert in_flight, f"the first run ended before the second was sent: {describe(first)}"
    assert first.kind == "complete", describe(first)
    assert second.kind != "complete" and HEAVY_REFUSAL in second.message, (
        "same right-hand X-Forwarded-For entry, another left-hand one: " + describe(second)
    )


def test_another_visitors_heavy_run_is_not_refused(warm):
    first, second, in_flight = _second_while_first_runs(
        warm, visitor("192.0.2.22"), "sweep", visitor("198.51.100.22")
    )
    assert in_flight, f"the first run ended before the second was sent: {describe(first)}"
    assert first.kind == "complete", describe(first)
    assert second.kind == "complete", f"another visitor's concurrent sweep: {describe(second)}"


def test_a_flooding_visitor_does_not_slow_another_visitors_steps(warm):
    flooder, other = visitor("192.0.2.10"), visitor("198.51.100.7")
    flood_answers: list[Answer] = []
    lock = threading.Lock()

    def heavy() -> None:
        answer = attempt(warm, "dynamics", DYNAMICS, flooder)
        with lock:
            flood_answers.append(answer)

    threads = [threading.Thread(target=heavy, daemon=True) for _ in range(FLOOD)]
    for thread in threads:
        thread.start()
    time.sleep(0.3)  # the flood is queued / running
    deadline = time.monotonic() + FLOOD_DEADLINE
    steps: list[Answer] = []
    while len(steps) < B_MAX_CALLS and time.monotonic() < deadline:
        flooding = any(thread.is_alive() for thread in threads)
        if not flooding and len(steps) >= B_MIN_CALLS:
            break
        steps.append(call(warm, "step", DEFAULT_STEP, other))
        time.sleep(0.1)
    for thread in threads:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), "the flood did not end in time"

    kinds = [answer.kind for answer in flood_answers]
    flood = f"flood answers: {', '.join(sorted(set(kinds)))} ({len(kinds)} of {FLOOD})"
    unavailable = [answer for answer in steps if answer.status == 503]
    assert not unavailable, f"{len(unavailable)} of B's {len(steps)} steps got HTTP 503; {flood}"
    failed = [answer for answer in steps if answer.kind != "complete"]
    assert not failed, f"B's steps refused: {describe(failed[0])}; {flood}"


def _upload(url: str, size: int) -> httpx.Response:
    with httpx.Client(timeout=TIMEOUT) as http:
        return http.post(
            f"{url}gradio_api/upload",
            files={"files": ("probe.bin", b"\0" * size, "application/octet-stream")},
            headers=visitor("192.0.2.30"),
        )


def test_an_upload_past_the_file_cap_is_refused(app_url):
    """One MB past the page's upload cap (the tensors tab's 80 MB: ``core.caps``), within the
    visitor's hourly budget: Gradio's max_file_size refuses it."""
    from playground.core.caps import TENSOR_FILE_MAX_BYTES

    response = _upload(app_url, TENSOR_FILE_MAX_BYTES + 2**20)
    assert 400 <= response.status_code < 500, (
        f"an upload past the cap got HTTP {response.status_code}: {response.text[:200]}"
    )
    assert _upload(app_url, 1000).status_code == 200, "the server stopped taking uploads"


def test_a_100_kb_upload_is_accepted(app_url):
    response = _upload(app_url, 100_000)
    assert response.status_code == 200, f"HTTP {response.status_code}: {response.text[:200]}"
    paths = response.json()
    assert isinstance(paths, list) and len(paths) == 1, paths


@pytest.mark.parametrize("streamed", [False, True], ids=["content-length", "streamed"])
def test_a_body_is_taken_up_to_its_cap_and_refused_past_it(warm, streamed):
    legal = request_body(DEFAULT_STEP).encode()
    at_cap = legal + b" " * (MAX_BODY_BYTES - len(legal))  # JSON allows trailing spaces
    with httpx.Client(timeout=TIMEOUT) as http:
        for body, expected in ((at_cap, 200), (at_cap + b" ", 413)):
            half = len(body) // 2
            content = iter([body[:half], body[half:]]) if streamed else body
            response = http.post(
                f"{warm}gradio_api/call/step",
                content=content,
                headers={"content-type": "application/json", **visitor("192.0.2.40")},
            )
            assert response.status_code == expected, (len(body), response.text[:200])
    assert CAP_TEXT in response.text, response.text[:300]


def test_100_mb_bodies_are_refused_before_they_are_read(app_server, warm):
    server = psutil.Process(app_server.process.pid)
    start = server.memory_info().rss
    peak = [start]
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.02):
            peak.append(server.memory_info().rss)

    answers: list[tuple[int, str, int]] = []

    def send(index: int) -> None:
        path = "/gradio_api/call/step" if index % 2 else "/gradio_api/queue/join"
        answers.append(send_body(app_server.port, path, BODY_BYTES, chunked=index >= BODIES // 2))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    senders = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(BODIES)]
    for thread in senders:
        thread.start()
    steps: list[Answer] = []
    while len(steps) < 3 or (len(steps) < 20 and any(t.is_alive() for t in senders)):
        steps.append(call(warm, "step", DEFAULT_STEP, visitor("198.51.100.8")))
    for thread in senders:
        thread.join(timeout=60)
    sampling.set()
    sampler.join(timeout=5)

    assert len(answers) == BODIES, f"{BODIES - len(answers)} senders never got an answer"
    for status, text, sent in answers:
        assert status == 413 and CAP_TEXT in text, (status, text[:300])
        assert sent < BODY_BYTES, "a 100 MB body was read whole before its refusal"
    grown = (max(peak) - start) / 2**20
    assert grown < RSS_ROOM_MB, f"the server's RSS grew {grown:.0f} MB over its start"
    for answer in steps:
        assert answer.kind == "complete", describe(answer)
