"""Memory, work caps and load of the launched app, as a public Space would see them.

Usage: ``python bench/bench_load.py``

Launches ``python app.py`` on a free local port (tests/app_server.py) and measures, in one run,
over raw HTTP (the Gradio 6 ``/gradio_api/call/<api>`` protocol, so each request can carry its
own X-Forwarded-For visitor; only documentation addresses, 192.0.2.x and 198.51.100.x):

  memory   RSS of the server process and its children (/proc/<pid>/status VmRSS), after a
           warm-up: 100 distinct /step shapes (n = 100..199 at 16 x 4) plus sweeps at distinct
           shapes add at most 80 MB; 20 distinct /dynamics settings (steps, mode, period at
           32 x 8 x 4) add at most 40 MB; /step calls 350 to 700 at one shape add at most 20 MB;
  class    30 visitors x 5 /step calls at the default shape, all at once: all answered, p95
           under 3 s;
  flood    while one visitor floods /dynamics (FLOOD concurrent requests, for FLOOD_SECONDS),
           another visitor's /step calls: p95 and max under 3 s, no HTTP 503;
  caps     the slowest single request at the largest allowed settings (/step 4096 x 1024 x
           1024, the largest /dynamics and the largest sweep the server accepts, first calls)
           against 8 x the largest /step's warm time. Measured last: a request past its
           time limit is abandoned and the server restarted.

Progress goes to stderr, result lines (measured value, target, PASS/FAIL) to stdout. Takes
about 10 minutes on 2 vCPUs; it always exits 0. The server process is always stopped.
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "tests"))

from app_server import AppServer  # noqa: E402
from http_calls import (  # noqa: E402
    DEFAULT_STEP,
    RUN_FIELDS,
    STEP_FIELDS,
    Answer,
    attempt,
    visitor,
)

DYNAMICS_FIELDS = (*STEP_FIELDS, *RUN_FIELDS)
DEFAULTS = dict(zip(STEP_FIELDS, DEFAULT_STEP, strict=True))
LARGEST_SHAPE = {"n": 4096, "d_in": 1024, "d_out": 1024}
MAX_STEPS = 1000  # the settings table's limit; the server names a lower one per shape
MEDIUM = {"n": 1024, "d_in": 256, "d_out": 128}

STEP_SHAPES_MB, DYNAMICS_SETTINGS_MB, REPEAT_MB = 80.0, 40.0, 20.0
CLASS_VISITORS, CLASS_CALLS, LATENCY_TARGET = 30, 5, 3.0
FLOOD, FLOOD_SECONDS, FLOOD_STEPS = 6, 20.0, 100
CAP_FACTOR = 8.0
CALL_TIMEOUT = 180.0


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def result_line(name: str, measured: str, target: str, ok: bool | None = None) -> None:
    verdict = "" if ok is None else f": {'PASS' if ok else 'FAIL'}"
    print(f"{name}: {measured} (target {target}){verdict}", flush=True)


def info_line(text: str) -> None:
    print(text, flush=True)


def args(fields=STEP_FIELDS, **changes: Any) -> list[Any]:
    """Positional API inputs: the defaults with ``changes``."""
    values = DEFAULTS | {"steps": 200, "mode": "static", "period": 100} | changes
    return [values[name] for name in fields]


def must(answer: Answer, what: str) -> Answer:
    if answer.kind != "complete":
        raise RuntimeError(f"{what}: {answer.kind} {answer.status} {answer.message[:300]}")
    return answer


# ---- measurements ----------------------------------------------------------------------------


def rss_mb(pid: int) -> float:
    """VmRSS of ``pid`` and all its descendants, in MB."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                parent = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(parent, []).append(int(entry))
    total_kb, todo = 0, [pid]
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total_kb += int(line.split()[1])
        except OSError:
            continue
    return total_kb / 1024


def settled_rss(pid: int) -> float:
    time.sleep(0.5)
    return rss_mb(pid)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered)) - 1))]


def memory(url: str, pid: int) -> None:
    who = visitor("192.0.2.201")
    with httpx.Client(timeout=CALL_TIMEOUT) as http:
        log("memory: warm-up (default /step, 5 shapes, 2 sweeps, 1 dynamics)")
        for _ in range(3):
            must(attempt(url, "step", args(), who, http), "warm-up /step")
        for n in range(90, 95):
            must(attempt(url, "step", args(n=n, d_in=16, d_out=4), who, http), "warm-up /step")
        for n in (8, 9):
            sweep = args(n=n, d_in=4, d_out=2, compute_dtype="float16")
            must(attempt(url, "sweep", sweep, who, http), "warm-up /sweep")
        small = {"n": 32, "d_in": 8, "d_out": 4}
        dynamics = args(DYNAMICS_FIELDS, **small, steps=10, mode="static", period=100)
        must(attempt(url, "dynamics", dynamics, who, http), "warm-up /dynamics")

        before = settled_rss(pid)
        log(f"memory: RSS after warm-up {before:.0f} MB; 100 /step shapes n = 100..199 at 16x4")
        for n in range(100, 200):
            must(attempt(url, "step", args(n=n, d_in=16, d_out=4), who, http), f"/step n={n}")
            if n % 20 == 19:
                log(f"  n = {n}: RSS {rss_mb(pid):.0f} MB")
        after_steps = settled_rss(pid)
        sweeps = [(n, dtype) for n in (10, 11, 12) for dtype in ("float16", "bfloat16")]
        log(f"memory: {len(sweeps)} sweeps at distinct shapes (n = 10..12 at 4x2, both dtypes)")
        for n, dtype in sweeps:
            sweep = args(n=n, d_in=4, d_out=2, compute_dtype=dtype)
            must(attempt(url, "sweep", sweep, who, http), f"/sweep n={n} {dtype}")
        after_sweeps = settled_rss(pid)
        grown = after_sweeps - before
        result_line(
            f"memory: 100 distinct /step shapes + {len(sweeps)} sweeps at distinct shapes",
            f"+{grown:.1f} MB ({before:.0f} -> {after_sweeps:.0f} MB; steps "
            f"+{after_steps - before:.1f}, sweeps +{after_sweeps - after_steps:.1f})",
            f"<= {STEP_SHAPES_MB:.0f} MB",
            grown <= STEP_SHAPES_MB,
        )

        before = settled_rss(pid)
        modes = ("none", "static", "dynamic")
        settings = [(20 + i, modes[i % 3], 1 + i) for i in range(20)]
        log("memory: 20 distinct /dynamics settings at 32x8x4")
        for steps, mode, period in settings:
            dynamics = args(DYNAMICS_FIELDS, **small, steps=steps, mode=mode, period=period)
            must(attempt(url, "dynamics", dynamics, who, http), f"/dynamics {steps} {mode}")
        after = settled_rss(pid)
        result_line(
            "memory: 20 distinct /dynamics settings (steps, mode, period) at 32x8x4",
            f"+{after - before:.1f} MB ({before:.0f} -> {after:.0f} MB)",
            f"<= {DYNAMICS_SETTINGS_MB:.0f} MB",
            after - before <= DYNAMICS_SETTINGS_MB,
        )

        log("memory: 700 /step calls at the default shape")
        at: dict[int, float] = {}
        for i in range(1, 701):
            must(attempt(url, "step", args(), who, http), f"/step call {i}")
            if i in (1, 350, 700):
                at[i] = settled_rss(pid)
            if i % 100 == 0:
                log(f"  call {i}: RSS {rss_mb(pid):.0f} MB")
        result_line(
            "memory: /step calls 350 to 700 at one shape (256x64x16)",
            f"+{at[700] - at[350]:.1f} MB (call 1: {at[1]:.0f} MB, 350: {at[350]:.0f} MB, "
            f"700: {at[700]:.0f} MB)",
            f"<= {REPEAT_MB:.0f} MB",
            at[700] - at[350] <= REPEAT_MB,
        )


def a_class(url: str) -> None:
    log(f"class: {CLASS_VISITORS} visitors x {CLASS_CALLS} /step calls at once")
    answers: list[Answer] = []
    lock = threading.Lock()
    start = threading.Barrier(CLASS_VISITORS)

    def student(i: int) -> None:
        with httpx.Client(timeout=CALL_TIMEOUT) as http:
            start.wait()
            for _ in range(CLASS_CALLS):
                answer = attempt(url, "step", args(), visitor(f"192.0.2.{i}"), http)
                with lock:
                    answers.append(answer)

    threads = [threading.Thread(target=student, args=(i,)) for i in range(1, CLASS_VISITORS + 1)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    done = [answer for answer in answers if answer.kind == "complete"]
    total = CLASS_VISITORS * CLASS_CALLS
    unavailable = sum(answer.status == 503 for answer in answers)
    times = [answer.seconds for answer in answers]
    p95 = percentile(times, 0.95)
    failed = [answer for answer in answers if answer.kind != "complete"]
    if failed:
        info_line(
            f"class: first failure: {failed[0].kind} {failed[0].status} {failed[0].message[:200]}"
        )
    result_line(
        f"class: {CLASS_VISITORS} visitors x {CLASS_CALLS} /step calls, concurrently",
        f"{len(done)}/{total} answered, {unavailable} HTTP 503, p50 "
        f"{statistics.median(times):.2f} s, p95 {p95:.2f} s, max {max(times):.2f} s "
        f"({wall:.1f} s wall)",
        f"all answered, p95 < {LATENCY_TARGET:.0f} s",
        len(done) == total and p95 < LATENCY_TARGET,
    )


def flood(url: str) -> None:
    flooder, other = visitor("192.0.2.10"), visitor("198.51.100.7")
    heavy = args(DYNAMICS_FIELDS, **MEDIUM, steps=FLOOD_STEPS, mode="static", period=100)
    shape = "x".join(str(MEDIUM[name]) for name in ("n", "d_in", "d_out"))
    log(f"flood: warm-up /dynamics {shape}, {FLOOD_STEPS} steps")
    warm = must(attempt(url, "dynamics", heavy, visitor("198.51.100.99")), "warm-up /dynamics")
    warm_again = must(attempt(url, "dynamics", heavy, visitor("198.51.100.99")), "warm /dynamics")
    alone = [must(attempt(url, "step", args(), other), "/step alone").seconds for _ in range(10)]
    log(
        f"flood: /dynamics first {warm.seconds:.1f} s, warm {warm_again.seconds:.1f} s; "
        f"/step alone median {statistics.median(alone):.2f} s"
    )

    stop = time.monotonic() + FLOOD_SECONDS
    flood_answers: list[Answer] = []
    lock = threading.Lock()

    def flooding() -> None:
        with httpx.Client(timeout=CALL_TIMEOUT) as http:
            while time.monotonic() < stop:
                answer = attempt(url, "dynamics", heavy, flooder, http)
                with lock:
                    flood_answers.append(answer)
                if answer.kind != "complete":
                    time.sleep(0.2)  # a refused flooder retries, at a bounded rate

    log(f"flood: {FLOOD} concurrent /dynamics from one visitor for {FLOOD_SECONDS:.0f} s")
    threads = [threading.Thread(target=flooding) for _ in range(FLOOD)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    steps: list[Answer] = []
    with httpx.Client(timeout=CALL_TIMEOUT) as http:
        while time.monotonic() < stop:
            steps.append(attempt(url, "step", args(), other, http))
            time.sleep(0.2)
    log("flood: window over; waiting for the flood's requests to drain")
    for thread in threads:
        thread.join()
    kinds: dict[str, int] = {}
    for answer in flood_answers:
        key = f"{answer.kind} {answer.status}" if answer.kind != "complete" else "complete"
        kinds[key] = kinds.get(key, 0) + 1
    info_line(
        f"flood: the flooder's {len(flood_answers)} /dynamics answers: "
        + ", ".join(f"{count} {kind}" for kind, count in sorted(kinds.items()))
        + f"; /dynamics {shape} x {FLOOD_STEPS} steps alone: {warm_again.seconds:.2f} s"
    )
    times = [answer.seconds for answer in steps]
    done = sum(answer.kind == "complete" for answer in steps)
    p95, worst = percentile(times, 0.95), max(times)
    result_line(
        "flood: the other visitor's /step (default shape) during the flood",
        f"{done}/{len(steps)} answered, p50 {statistics.median(times):.2f} s, p95 {p95:.2f} s, "
        f"max {worst:.2f} s (alone: median {statistics.median(alone):.2f} s)",
        f"p95 and max < {LATENCY_TARGET:.0f} s",
        done == len(steps) and p95 < LATENCY_TARGET and worst < LATENCY_TARGET,
    )
    unavailable = sum(answer.status == 503 for answer in steps)
    result_line(
        "flood: HTTP 503 answers to the other visitor",
        f"{unavailable} of {len(steps)}",
        "0",
        unavailable == 0,
    )


RANGE = re.compile(r"^(\w+) \(.*?\bin \[(-?\d+), (\d+)\]")


def largest_accepted(url: str, api: str, values: dict[str, Any], timeout: float):
    """Send the request; while it is refused naming a field and its range [low, high], set the
    field to ``high`` and resend (a few times at most). Returns (values sent, answer)."""
    fields = DYNAMICS_FIELDS if api == "dynamics" else STEP_FIELDS
    who = visitor("192.0.2.202")
    for _ in range(6):
        answer = attempt(url, api, [values[name] for name in fields], who, timeout=timeout)
        match = RANGE.match(answer.message) if answer.kind in ("error", "http") else None
        if not match or match.group(1) not in values:
            return values, answer
        log(f"  /{api} refused: {answer.message[:160]}")
        values = values | {match.group(1): int(match.group(3))}
    return values, answer


def describe(values: dict[str, Any], api: str) -> str:
    shape = "x".join(str(values[name]) for name in ("n", "d_in", "d_out"))
    extra = f", {values['steps']} steps, {values['mode']}" if api == "dynamics" else ""
    return f"{shape} {values['compute_dtype']}{extra}"


def work_caps(server: AppServer) -> AppServer:
    url = server.url
    largest = args(**LARGEST_SHAPE)
    who = visitor("192.0.2.202")
    log("caps: largest /step, first call and 3 warm calls")
    first = must(attempt(url, "step", largest, who), "largest /step")
    warm = [must(attempt(url, "step", largest, who), "largest /step").seconds for _ in range(3)]
    step_warm = statistics.median(warm)
    budget = CAP_FACTOR * step_warm
    info_line(
        f"caps: /step 4096x1024x1024: first call {first.seconds:.2f} s, warm {step_warm:.2f} s "
        f"(median of 3); {CAP_FACTOR:.0f} x warm = {budget:.1f} s"
    )
    timeout = max(90.0, 4 * budget)
    slowest = [("/step first call", first.seconds, "")]
    heavy = [
        (
            "dynamics",
            DEFAULTS | LARGEST_SHAPE | {"steps": MAX_STEPS, "mode": "dynamic", "period": 2000},
        ),
        ("sweep", DEFAULTS | LARGEST_SHAPE | {"compute_dtype": "bfloat16"}),
    ]
    for api, values in heavy:
        log(f"caps: the largest /{api} the server accepts (gives up after {timeout:.0f} s)")
        values, answer = largest_accepted(url, api, values, timeout)
        what = describe(values, api)
        if answer.kind == "complete":
            measured = f"{answer.seconds:.1f} s"
        elif answer.kind == "timeout":
            measured = f"> {timeout:.0f} s (abandoned)"
        else:
            measured = f"refused: {answer.message[:160]}"
        ok = answer.kind in ("complete", "timeout") and answer.seconds <= budget
        result_line(
            f"caps: largest allowed /{api} ({what}), first call",
            measured,
            f"<= {CAP_FACTOR:.0f} x largest /step warm = {budget:.1f} s",
            ok if answer.kind in ("complete", "timeout") else None,
        )
        if answer.kind in ("complete", "timeout"):
            slowest.append((f"/{api} {what}", answer.seconds, answer.kind))
        if answer.kind == "timeout" and api != heavy[-1][0]:
            log("caps: restarting the server (the abandoned request is still running)")
            server.stop()
            server = AppServer(log_name="bench_load_server.log").start()
            url = server.url
    name, seconds, kind = max(slowest, key=lambda item: item[1])
    result_line(
        "caps: slowest single request at the largest allowed settings",
        f"{'> ' if kind == 'timeout' else ''}{seconds:.1f} s ({name})",
        f"<= {CAP_FACTOR:.0f} x largest /step warm = {budget:.1f} s",
        seconds <= budget,
    )
    return server


def main() -> None:
    began = time.perf_counter()
    # A terminated bench still stops its server (the finally below runs on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    server = AppServer(log_name="bench_load_server.log")
    try:
        log("starting python app.py")
        server.start()
        pid = server.process.pid
        info_line(f"server: pid {pid}, RSS at start {rss_mb(pid):.0f} MB, {os.cpu_count()} CPUs")
        memory(server.url, pid)
        a_class(server.url)
        flood(server.url)
        server = work_caps(server)
    finally:
        server.stop()
    log(f"done in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
