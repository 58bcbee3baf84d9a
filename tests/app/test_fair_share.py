"""A share of the queue per visitor, and a visitor key a client cannot forge.

The key rule (unit, no app): with N trusted proxies the visitor is the N-th X-Forwarded-For
entry from the right (every header line counts, in order), with 0 the connection's peer; the
default is 1 on a Hugging Face Space (SPACE_ID set), else 0.

Against one app launched with PLAYGROUND_TRUSTED_PROXIES=1 (traffic to 127.0.0.1 only;
visitors are documentation addresses, RFC 5737), while one visitor sends 300 of the largest
accepted MLP /step calls, 8 raw joins of the page's commit event with the same inputs and 10
training runs with rotated left-hand X-Forwarded-For values:
  - an honest visitor's /step and page commit are each admitted and answered, none with HTTP
    503, and so is its sweep (the flooder's backlog is refused, not queued ahead of it);
  - every refusal of the flooding visitor is HTTP 429 naming its limit, and at most one of its
    ten training runs is admitted;
  - a session's newer page event replaces its own waiting one of the same kind: of three
    commits joined back to back, the last computes and at most one of the older two does
    (the other changes nothing).

And while a crowd of CROWD_ADDRESSES documentation addresses sends 4 heavy requests each (three
/step calls just over the large lane's work and a sweep; within every visitor's share), an
honest visitor's /step and page commit are each admitted and answered with no HTTP 503, and
every refusal of the crowd is HTTP 429 naming the server-wide limit it met.

How long the honest calls take under the flood and the crowd depends on the machine: no test
asserts it. ``python bench/bench_load.py`` prints it against its 3 s target (rows "fair share"
and "crowd").
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest
from starlette.datastructures import Headers

from app_server import AppServer
from http_calls import (
    DEFAULT_STEP,
    Answer,
    call,
    commit_inputs,
    fn_index,
    join,
    joins,
    request_body,
    visitor,
)
from playground.core.settings.settings import ConfigError, StepConfig
from playground.ui.fair_use import trusted_proxies
from playground.ui.fair_use import visitor as visitor_key


def _largest_accepted_n(settings: dict) -> int:
    """The largest N the cost model accepts for ``settings`` (its caps fall as N grows), or 0
    when it accepts none."""
    low, high = 0, 4096
    while low < high:
        middle = (low + high + 1) // 2
        try:
            StepConfig(**settings, n=middle)
            low = middle
        except ConfigError:
            high = middle - 1
    return low


# The largest /step the cost model accepts (its warm work; bench/bench_load.py times it): the
# deepest float8 MLP of width 1024 it takes, with adam, at its largest N.
_MLP = {"d_in": 1024, "d_out": 1024, "compute_dtype": "float8", "model": "mlp"}
_MLP |= {"hidden_width": 1024, "optimizer": "adam"}
_DEPTH = max(h for h in range(1, 9) if _largest_accepted_n(_MLP | {"hidden_layers": h}))
_MLP |= {"hidden_layers": _DEPTH}
LARGEST_MLP = [0, _largest_accepted_n(_MLP), 1024, 1024, 0.1, 1024.0, 0, 1.0, 1.0, "float8"]
LARGEST_MLP += ["mlp", _DEPTH, 1024, "relu", "adam"]
SMALL_SWEEP = [0, 64, 16, 4, 0.1, 1024.0, 0, 1.0, 1.0, "float16"]
# About 1 s warm: the flooding visitor's training runs.
DYNAMICS = [0, 1024, 256, 128, 0.1, 1024.0, 0, 1.0, 1.0, "bfloat16", 200, "static", 100]
HONEST = "198.51.100.7"
FLOODER = "192.0.2.66"
SHARE_TEXT = "at most 4 requests queued or running per visitor"
HEAVY_TEXT = "one heavy run at a time"
# Just over 2^30 multiply-adds (1.26 x, by core.settings.cost): large work, a few tens of ms warm.
CROWD_STEP = [0, 1024, 512, 512, 0.1, 1024.0, 0, 1.0, 1.0, "bfloat16"]
CROWD_NETWORKS = ("192.0.2", "198.51.100", "203.0.113")
CROWD_ADDRESSES = [f"{net}.{host}" for net in CROWD_NETWORKS for host in range(120, 144)][:70]
CROWD_TEXTS = ("takes at most 7 large requests", "takes at most 8 sweeps and training runs")


def _headers(forwarded: str | list[str]) -> Headers:
    lines = [forwarded] if isinstance(forwarded, str) else forwarded
    return Headers(raw=[(b"x-forwarded-for", line.encode()) for line in lines])


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "192.0.2.1, 198.51.100.2", "127.0.0.9"),  # the peer, whatever the header says
        (1, "192.0.2.1, 198.51.100.2", "198.51.100.2"),  # the entry our one proxy appended
        (1, ["192.0.2.1", "198.51.100.2"], "198.51.100.2"),  # two header lines are one list
        (2, "192.0.2.1, 198.51.100.2, 192.0.2.3", "198.51.100.2"),
        (2, "198.51.100.2", "198.51.100.2"),  # fewer entries: the leftmost a proxy wrote
        (1, "", "127.0.0.9"),  # no header at all: the peer
    ],
)
def test_the_visitor_is_the_nth_entry_from_the_right(proxies, forwarded, expected):
    assert visitor_key(_headers(forwarded), "127.0.0.9", proxies) == expected


def test_a_client_cannot_choose_its_key_by_writing_on_the_left():
    keys = {
        visitor_key(_headers(f"192.0.2.{index}, {FLOODER}"), "127.0.0.1", 1) for index in range(10)
    }
    assert keys == {FLOODER}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, 0),
        ({"SPACE_ID": "someone/playground"}, 1),
        ({"SPACE_ID": "someone/playground", "PLAYGROUND_TRUSTED_PROXIES": "0"}, 0),
        ({"PLAYGROUND_TRUSTED_PROXIES": "2"}, 2),
    ],
)
def test_trusted_proxies_default_to_the_space(environ, expected):
    assert trusted_proxies(environ) == expected


def test_a_negative_proxy_count_is_refused():
    with pytest.raises(ValueError, match="PLAYGROUND_TRUSTED_PROXIES"):
        trusted_proxies({"PLAYGROUND_TRUSTED_PROXIES": "-1"})


@pytest.fixture(scope="module")
def proxied_url() -> Iterator[str]:
    """The app behind one trusted proxy, warm for every shape used here."""
    saved = os.environ.get("PLAYGROUND_TRUSTED_PROXIES")
    os.environ["PLAYGROUND_TRUSTED_PROXIES"] = "1"
    try:
        server = AppServer(log_name="fair_share.log").start()
    finally:
        if saved is None:
            os.environ.pop("PLAYGROUND_TRUSTED_PROXIES")
        else:
            os.environ["PLAYGROUND_TRUSTED_PROXIES"] = saved
    try:
        url = server.url
        for api, data, who in (
            ("step", DEFAULT_STEP, HONEST),
            ("sweep", SMALL_SWEEP, HONEST),
            ("step", LARGEST_MLP, FLOODER),
            ("dynamics", DYNAMICS, FLOODER),
        ):
            answer = call(url, api, data, visitor(who))
            assert answer.kind == "complete", f"warm-up /{api}: {answer.message[:300]}"
        yield url
    finally:
        server.stop()


@pytest.mark.slow
def test_a_flooding_visitor_gets_its_share_and_no_more(proxied_url):
    url = proxied_url
    commit = fn_index(url, "on_commit")
    flood: Counter[int] = Counter()
    refusals: list[str] = []
    started = threading.Event()

    def post(client: httpx.Client, path: str, body: str, forwarded: str) -> None:
        response = client.post(
            f"{url}gradio_api/{path}",
            content=body,
            headers={"content-type": "application/json", "X-Forwarded-For": forwarded},
        )
        flood[response.status_code] += 1
        if response.status_code != 200:
            refusals.append(f"{path}: {response.status_code} {response.text[:200]}")
        started.set()

    def flooder() -> None:
        with httpx.Client(timeout=30) as client:
            for index in range(10):  # training runs, each with another left-hand entry
                body = request_body(DYNAMICS)
                post(client, "call/dynamics", body, f"192.0.2.{100 + index}, {FLOODER}")
            for _ in range(8):  # the page's private commit event, joined raw
                body = httpx.Request(
                    "POST",
                    url,
                    json={
                        "data": commit_inputs(LARGEST_MLP, url),
                        "fn_index": commit,
                        "session_hash": uuid.uuid4().hex[:11],
                    },
                ).content.decode()
                post(client, "queue/join", body, FLOODER)
            for _ in range(300):
                post(client, "call/step", request_body(LARGEST_MLP), FLOODER)
                time.sleep(0.01)  # the flood lasts the honest visitor's calls (about 3 s)

    thread = threading.Thread(target=flooder, daemon=True)
    thread.start()
    assert started.wait(30), "the flood never started"
    honest: list[tuple[str, Answer]] = []
    who = visitor(HONEST)
    for index in range(3):
        honest.append(("step", call(url, "step", DEFAULT_STEP, who, timeout=60)))
        session = f"honest{index}"
        honest.append(
            (
                "commit",
                join(url, commit, commit_inputs(DEFAULT_STEP, url), who, session_hash=session),
            )
        )
    sweep = call(url, "sweep", SMALL_SWEEP, who, timeout=120)
    thread.join(120)
    assert not thread.is_alive(), "the flood did not end"

    for name, answer in honest:
        assert answer.status != 503, f"honest {name}: HTTP 503 {answer.message[:200]}"
        assert answer.kind == "complete", f"honest {name}: {answer.kind} {answer.message[:200]}"
    assert sweep.status != 503 and sweep.kind == "complete", f"honest sweep: {sweep.message[:200]}"
    assert set(flood) <= {200, 429}, f"flood answers: {dict(flood)}"
    assert flood[200] >= 4, f"the flooding visitor never had its share: {dict(flood)}"
    assert flood[429] >= 318 - 4 - 40, f"flood answers: {dict(flood)}"  # a few places free up
    assert all(SHARE_TEXT in text or HEAVY_TEXT in text for text in refusals), refusals[:3]
    admitted_runs = 10 - sum(text.startswith("call/dynamics") for text in refusals)
    assert admitted_runs <= 1, f"{admitted_runs} of the 10 training runs were admitted"


def _skipped(answer: Answer) -> bool:
    """An answer that changes nothing: no outputs (replaced still in Gradio's queue, answered
    as Gradio's /cancel answers) or every output a bare update (replaced in its session's
    lane)."""
    outputs = answer.payload
    return outputs is None or all(output == {"__type__": "update"} for output in outputs)


@pytest.mark.slow
def test_a_sessions_newer_commit_replaces_its_waiting_one(proxied_url):
    commit = fn_index(proxied_url, "on_commit")
    seeds = [[seed, *LARGEST_MLP[1:]] for seed in (11, 12, 13)]
    first, middle, last = joins(
        proxied_url,
        commit,
        [commit_inputs(step, proxied_url) for step in seeds],
        visitor("198.51.100.31"),
        session_hash="replaced1",
        timeout=60,
    )
    assert [first.kind, middle.kind, last.kind] == ["complete"] * 3
    # The newest computes; of the two older ones at most one did (the first may already have
    # been running, or still queued when the second came).
    assert not _skipped(last)
    assert _skipped(first) or _skipped(middle), "three commits of one session all computed"


@pytest.mark.slow
def test_a_crowd_of_heavy_requests_leaves_room_for_light_work(proxied_url):
    url = proxied_url
    warmed = call(url, "step", CROWD_STEP, visitor(CROWD_ADDRESSES[0]))
    assert warmed.kind == "complete", warmed.message[:300]
    commit = fn_index(url, "on_commit")
    answers: Counter[int] = Counter()
    refusals: list[str] = []
    lock = threading.Lock()
    started = threading.Event()

    def crowd(addresses: list[str]) -> None:
        with httpx.Client(timeout=60) as client:
            for address in addresses:
                for api, data in (("step", CROWD_STEP),) * 3 + (("sweep", SMALL_SWEEP),):
                    response = client.post(
                        f"{url}gradio_api/call/{api}",
                        content=request_body(data),
                        headers={"content-type": "application/json", **visitor(address)},
                    )
                    with lock:
                        answers[response.status_code] += 1
                        if response.status_code != 200:
                            refusals.append(f"{response.status_code} {response.text[:300]}")
                    started.set()

    senders = [
        threading.Thread(target=crowd, args=(CROWD_ADDRESSES[start::14],), daemon=True)
        for start in range(14)
    ]
    for thread in senders:
        thread.start()
    assert started.wait(30), "the crowd never started"
    honest: list[tuple[str, Answer]] = []
    who = visitor(HONEST)
    for index in range(3):
        honest.append(("step", call(url, "step", DEFAULT_STEP, who, timeout=60)))
        session = f"crowded{index}"
        honest.append(
            (
                "commit",
                join(url, commit, commit_inputs(DEFAULT_STEP, url), who, session_hash=session),
            )
        )
    for thread in senders:
        thread.join(120)
    assert not any(thread.is_alive() for thread in senders), "the crowd did not end"

    for name, answer in honest:
        assert answer.status != 503, f"honest {name}: HTTP 503 {answer.message[:200]}"
        assert answer.kind == "complete", f"honest {name}: {answer.kind} {answer.message[:200]}"
    assert sum(answers.values()) == 4 * len(CROWD_ADDRESSES)
    assert set(answers) <= {200, 429}, f"crowd answers: {dict(answers)}"
    assert answers[429] >= 2 * len(CROWD_ADDRESSES), f"crowd answers: {dict(answers)}"
    assert all(text.startswith("429") for text in refusals), refusals[:3]
    for limit in CROWD_TEXTS:
        assert any(limit in text for text in refusals), f"no refusal names {limit!r}"
    assert all(any(limit in text for limit in CROWD_TEXTS) for text in refusals), refusals[:3]
