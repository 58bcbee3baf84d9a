"""Memory, work caps and load of the launched app, as a public Space would see them.

Usage: ``python bench/bench_load.py [all | shares | memory | class | defaults | soak]``
(``all``, the default, runs every measurement below but the last two; ``shares`` only the
latencies the tests check only structurally: class, flood, fair and crowd; ``memory``,
``class``, ``defaults`` and ``soak`` only theirs; ``memory class`` both, on one server)

Launches ``python app.py`` on a free local port (tests/app_server.py) and measures, in one run,
over raw HTTP (the Gradio 6 ``/gradio_api/call/<api>`` protocol, so each request can carry its
own X-Forwarded-For visitor; only documentation addresses, 192.0.2.x and 198.51.100.x):

  memory   RSS of the server process and its children (/proc/<pid>/status VmRSS), after a
           warm-up: 100 distinct /step shapes (n = 100..199 at 16 x 4) plus sweeps at distinct
           shapes add at most PROGRAMS_MB (visitors' programs are a bounded count:
           core.step.compiled.MAX_PROGRAMS); 20 distinct /dynamics
           settings (steps, mode, period at 32 x 8 x 4) add at most 40 MB; /step calls 350 to
           700 at one shape add at most 20 MB;
  class    30 visitors x 5 /step calls at the default shape, all at once: all answered, p95
           under 3 s; once with each visitor's calls in one session (as a browser tab's or a
           gradio_client Client's), once with a new session per call (raw HTTP with no
           session_hash: Gradio copies every block's config for each new session);
  flood    while one visitor floods /dynamics (FLOOD concurrent requests, for FLOOD_SECONDS),
           another visitor's /step calls: p95 and max under 3 s, no HTTP 503;
  fair     with PLAYGROUND_TRUSTED_PROXIES=1, one visitor sends 300 of the largest accepted
           MLP /step calls, 8 raw joins of the page's commit event and 10 training runs with
           rotated left-hand X-Forwarded-For values: another visitor's /step and page commit
           within 3 s, no 503, its sweep not behind a backlog, the flood answered 200 or 429;
  crowd    while CROWD_ADDRESSES visitors send 4 heavy requests each (three /step calls just
           over 2^30 multiply-adds and a sweep, within every visitor's share), another
           visitor's /step and page commit (3 each): slowest under 3 s, no HTTP 503, the crowd
           answered 200 or 429 (the tests check the same run's structure, not its seconds);
  caps     each endpoint's largest request that the cost model (core/settings/cost.py) accepts,
           priced in-process: its first (compiling) and warm time, the warm one against 8 x the
           largest linear /step's warm time (a compile is a one-off and caps nothing),
           and what its first call adds to the server's peak memory (VmHWM) against 1 GB;
  mixed    6,000 mixed calls from 20 visitors (/step at a few seeds, /inspect, /export, and every
           50th a small /sweep or /dynamics): RSS after calls 3,000 and 6,000 differ by at most
           MIXED_MB (flat; the queue used to keep a record per finished call);
  defaults every endpoint x model x recipe at the page's defaults (36 combinations, a /dynamics
           of the default 200 steps), with no warm-up and an empty compilation cache on disk:
           each answered, its first call's and its warm (median of 2) seconds; then the same
           first calls on a restarted server reading that cache;
  soak     SOAK_ROUNDS rounds of a cycle of SOAK_PROGRAMS /step programs (dtype x batch size),
           more than the 16 a server used to keep: the cycle's p50 after its first round within
           2 x the p50 of a run at one shape in the same run, and RSS flat over its second half
           (within SOAK_MB); also the RSS the first round's compiles added per program.

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
sys.path.insert(0, str(REPO_ROOT))

from app_server import AppServer  # noqa: E402
from http_calls import (  # noqa: E402
    DEFAULT_STEP,
    FIELDS,
    RUN_FIELDS,
    STEP_FIELDS,
    Answer,
    attempt,
    visitor,
)

DYNAMICS_FIELDS = (*STEP_FIELDS, *RUN_FIELDS)
DEFAULTS = dict(zip(STEP_FIELDS, DEFAULT_STEP, strict=True))
LARGEST_SHAPE = {"n": 4096, "d_in": 1024, "d_out": 1024}
MEDIUM = {"n": 1024, "d_in": 256, "d_out": 128}
# Little work, much compile: the deepest MLP of width 64 (its compile grows with depth).
NARROW_DEEP = {"n": 256, "d_in": 64, "d_out": 16, "model": "mlp", "hidden_layers": 8}
NARROW_DEEP |= {"hidden_width": 64, "optimizer": "adam"}
# The MLP whose step the cost model prices highest at full widths: its N is the largest accepted.
LARGEST_MLP_SETTINGS = LARGEST_SHAPE | {
    "model": "mlp",
    "hidden_layers": 3,
    "hidden_width": 1024,
    "compute_dtype": "float8",
    "optimizer": "adam",
}

PROGRAMS_MB, DYNAMICS_SETTINGS_MB, REPEAT_MB = 80.0, 40.0, 20.0
CLASS_VISITORS, CLASS_CALLS, LATENCY_TARGET = 30, 5, 3.0
FLOOD, FLOOD_SECONDS, FLOOD_STEPS = 6, 20.0, 100
CAP_FACTOR = 8.0
# Warm calls per request in the caps rows: their median is its warm time (one call varied by
# a third between runs).
WARM_CALLS = 3
MIXED_CALLS, MIXED_MB = 6000, 10.0
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
            f"<= {PROGRAMS_MB:.0f} MB",
            grown <= PROGRAMS_MB,
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


def mixed_calls(url: str, pid: int) -> None:
    """MIXED_CALLS calls of every kind from 20 visitors, one at a time: RSS must stay flat over
    the second half (after the first half has filled every bounded cache)."""
    small = {"n": 16, "d_in": 4, "d_out": 2}

    def request(i: int) -> tuple[str, list[Any]]:
        if i % 50 == 25:
            return "sweep", args(**small, compute_dtype="float16")
        if i % 50 == 49:
            return "dynamics", args(DYNAMICS_FIELDS, **small, steps=20, mode="dynamic", period=5)
        kind = i % 4
        if kind == 0:
            return "inspect", [1e-8 * (1 + i % 97)]
        if kind == 1:
            return "export", args()
        return "step", args(model_seed=i % 8)

    log(f"mixed: {MIXED_CALLS} mixed calls from 20 visitors")
    rss: dict[int, float] = {}
    failures = 0
    with httpx.Client(timeout=CALL_TIMEOUT) as http:
        for i in range(1, MIXED_CALLS + 1):
            api, inputs = request(i)
            answer = attempt(url, api, inputs, visitor(f"198.51.100.{1 + i % 20}"), http)
            failures += answer.kind != "complete"
            if i % 1000 == 0:
                rss[i] = settled_rss(pid)
                log(f"  call {i}: RSS {rss[i]:.0f} MB")
    half = MIXED_CALLS // 2
    trend = ", ".join(f"{i}: {mb:.0f}" for i, mb in sorted(rss.items()))
    result_line(
        f"memory: {MIXED_CALLS} mixed calls (/step /inspect /export /sweep /dynamics), "
        f"calls {half} to {MIXED_CALLS}",
        f"{rss[MIXED_CALLS] - rss[half]:+.1f} MB (RSS after calls {trend} MB; "
        f"{failures} not answered)",
        f"<= {MIXED_MB:.0f} MB, all answered",
        rss[MIXED_CALLS] - rss[half] <= MIXED_MB and not failures,
    )


def a_class(url: str, *, sessions: bool) -> None:
    """30 visitors x 5 /step calls, all at once. With ``sessions`` each visitor's calls share
    one session (``session_hash``), as a browser tab's or a gradio_client Client's do; without,
    each call is a new session, as a script of raw HTTP calls with no session_hash sends them
    (Gradio sets up a session's copy of every block's config for each: a cost in the page's
    size)."""
    how = "one session per visitor" if sessions else "a new session per call"
    log(f"class: {CLASS_VISITORS} visitors x {CLASS_CALLS} /step calls at once, {how}")
    answers: list[Answer] = []
    lock = threading.Lock()
    start = threading.Barrier(CLASS_VISITORS)

    def student(i: int) -> None:
        session = f"class-visitor-{i}-{time.monotonic_ns()}" if sessions else None
        with httpx.Client(timeout=CALL_TIMEOUT) as http:
            start.wait()
            for _ in range(CLASS_CALLS):
                who = visitor(f"192.0.2.{i}")
                answer = attempt(url, "step", args(), who, http, session=session)
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
        f"class: {CLASS_VISITORS} visitors x {CLASS_CALLS} /step calls, concurrently, {how}",
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


# ---- the cost model's largest requests --------------------------------------------------------


def memory_mb(pid: int, field: str) -> float:
    """VmRSS or VmHWM (the peak since the last reset) of the server process, in MB."""
    with open(f"/proc/{pid}/status") as status:
        match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    return int(match.group(1)) / 1024 if match else float("nan")


def reset_peak(pid: int) -> None:
    """Reset the process's VmHWM to its current RSS (Linux: "5" to /proc/<pid>/clear_refs)."""
    with open(f"/proc/{pid}/clear_refs", "w") as refs:
        refs.write("5")


def largest_n(accepts) -> int:
    """The largest N in [1, 4096] that ``accepts(n)`` (monotone: True up to some N)."""
    low, high = 1, 4096
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if accepts(middle) else (low, middle - 1)
    return low


def largest_requests() -> list[tuple[str, str, list[Any]]]:
    """(row name, endpoint, positional inputs): the largest request of each endpoint that the
    cost model (core/settings/cost.py, with each endpoint's own cap) accepts."""
    from playground.core.runs.sweep import check_sweep_work, sweep_exponents
    from playground.core.settings.settings import ConfigError, StepConfig

    def valid(**settings: Any) -> StepConfig | None:
        try:
            return StepConfig(**settings)
        except ConfigError:
            return None

    def sweep_fits(settings: dict[str, Any], n: int) -> bool:
        config = valid(**settings | {"n": n})
        if config is None:
            return False
        try:
            check_sweep_work(config, sweep_exponents(config.compute_dtype).size)
        except ConfigError:
            return False
        return True

    def runs(settings: dict[str, Any]) -> bool:
        config = valid(**settings)
        if config is None or config.max_steps == 0:
            return False
        try:
            config.replace(steps=1).check_run()
        except ConfigError:
            return False
        return True

    def deepest(settings: dict[str, Any], accepts=lambda s: valid(**s) is not None):
        """``settings`` with the most hidden layers (up to its own) accepted at N = 1."""
        for layers in range(settings["hidden_layers"], 0, -1):
            if accepts(settings | {"hidden_layers": layers, "n": 1}):
                return settings | {"hidden_layers": layers}
        return settings | {"model": "linear"}

    def largest(settings: dict[str, Any]) -> dict[str, Any]:
        """The deepest accepted ``settings``, at the largest N accepted."""
        settings = deepest(settings)
        return settings | {"n": largest_n(lambda n: valid(**settings | {"n": n}) is not None)}

    def longest_run(settings: dict[str, Any], grow_n: bool) -> dict[str, Any]:
        """The deepest run of ``settings`` accepted (at the largest N when ``grow_n``), with
        the most steps accepted."""
        settings = deepest(settings, runs)
        if grow_n:
            settings |= {"n": largest_n(lambda n: runs(settings | {"n": n}))}
        steps = StepConfig(**settings).max_steps
        return settings | {"steps": steps, "mode": "dynamic", "period": 2000}

    mlp = largest(LARGEST_MLP_SETTINGS)
    # The most parameter entries a step accepts: the widest MLP at a small batch.
    wide = LARGEST_SHAPE | {"model": "mlp", "hidden_width": 1024, "optimizer": "adam", "n": 64}
    wide |= {"hidden_layers": max(h for h in range(1, 9) if valid(**wide | {"hidden_layers": h}))}
    linear = dict(LARGEST_SHAPE)
    rows = [
        ("/step largest linear", "step", linear),
        (f"/step largest MLP ({describe(mlp)})", "step", mlp),
        (f"/step widest MLP ({describe(wide)})", "step", wide),
        ("/downloads largest linear", "downloads", linear),
        ("/export largest linear", "export", linear),
    ]
    # The block-scaled recipes emulate their quantizers in float32: their own largest requests,
    # and (little work, much compile) their deepest narrow MLP.
    for dtype in ("mxfp8", "nvfp4"):
        block = largest(LARGEST_MLP_SETTINGS | {"compute_dtype": dtype})
        rows.append((f"/step largest MLP ({describe(block)})", "step", block))
        narrow = deepest(NARROW_DEEP | {"compute_dtype": dtype})
        rows.append((f"/step deepest MLP ({describe(narrow)})", "step", narrow))
        run = linear | {"compute_dtype": dtype}
        run |= {"n": largest_n(lambda n, r=run: runs(r | {"n": n}))}
        run |= {"steps": StepConfig(**run).max_steps, "mode": "dynamic", "period": 2000}
        rows.append((f"/dynamics linear ({describe(run)})", "dynamics", run))
    narrow = deepest(NARROW_DEEP)
    rows.append((f"/step deepest MLP ({describe(narrow)})", "step", narrow))
    # Training runs: an MLP's in bfloat16 (float8's and the block recipes' MLP runs are refused
    # for their compile), the deepest accepted at its largest N, and the widest at N = 64.
    run_mlp = LARGEST_MLP_SETTINGS | {"compute_dtype": "bfloat16"}
    for name, run in (
        ("linear", linear | {"steps": StepConfig(**linear).max_steps}),
        ("MLP", longest_run(run_mlp, grow_n=True)),
        ("widest MLP", longest_run(wide, grow_n=False)),
    ):
        run |= {"mode": "dynamic", "period": 2000}
        rows.append((f"/dynamics {name} ({describe(run)})", "dynamics", run))
    for dtype in ("bfloat16", "float8"):
        settings = linear | {"compute_dtype": dtype}
        settings |= {"n": largest_n(lambda n, s=settings: sweep_fits(s, n))}
        rows.append((f"/sweep largest linear ({describe(settings)})", "sweep", settings))
    for layers in range(8, 0, -1):  # the deepest MLP of width 1024 that a sweep accepts
        deep = mlp | {"hidden_layers": layers, "n": 1}
        if sweep_fits(deep, 1):
            deep |= {"n": largest_n(lambda n, d=deep: sweep_fits(d, n))}
            rows.append((f"/sweep deepest MLP ({describe(deep)})", "sweep", deep))
            break
    return [(name, api, api_inputs(api, settings)) for name, api, settings in rows] + [
        ("/inspect", "inspect", [1e-8])
    ]


def describe(settings: dict[str, Any]) -> str:
    parts = [f"N={settings['n']}", f"{settings.get('d_in', 64)}x{settings.get('d_out', 16)}"]
    if settings.get("model") == "mlp":
        parts.append(f"mlp {settings['hidden_layers']}x{settings['hidden_width']}")
    parts += [settings.get("compute_dtype", "bfloat16"), settings.get("optimizer", "sgd")]
    if "steps" in settings:
        parts.append(f"{settings['steps']} steps")
    return " ".join(str(part) for part in parts)


def api_inputs(api: str, settings: dict[str, Any]) -> list[Any]:
    """Positional inputs of ``api`` (the public order of tests/http_calls.FIELDS)."""
    from playground.core.settings.settings import defaults

    values = (
        defaults()
        | DEFAULTS
        | {"downloads": False}
        | {"steps": 200, "mode": "static", "period": 100}
        | {"model": "linear", "hidden_layers": 2, "hidden_width": 64, "activation": "relu"}
        | {"optimizer": "sgd", "data": None, "fp8_scaling": "current", "amax_history": 16}
        | {"pure_rounding": "nearest"}
        | settings
    )
    return [values[name] for name in FIELDS[api if api in FIELDS else "step"]]


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (all its threads), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_idle(pid: int, timeout: float = 120.0) -> None:
    """Block until the server used under 5% of a CPU over one second (or ``timeout``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        before = cpu_seconds(pid)
        time.sleep(1.0)
        if cpu_seconds(pid) - before < 0.05:
            return
    info_line(f"server still busy after {timeout:.0f} s; measuring anyway")


def work_caps(server: AppServer) -> None:
    """Each endpoint's largest accepted request: its first and warm time against 8 x the
    largest linear /step's warm time, and what its first call adds to the server's peak
    memory (VmHWM, reset just before, over VmRSS then) against 1 GB."""
    url, pid = server.url, server.process.pid
    who = visitor("192.0.2.202")
    rows = largest_requests()
    wait_until_idle(pid)  # the flood's admitted requests may still be running
    budget = None
    for name, api, inputs in rows:
        reset_peak(pid)
        before = memory_mb(pid, "VmRSS")
        first = attempt(url, api, inputs, who, timeout=CALL_TIMEOUT)
        added = memory_mb(pid, "VmHWM") - before
        warms = [attempt(url, api, inputs, who, timeout=CALL_TIMEOUT) for _ in range(WARM_CALLS)]
        refused = [answer for answer in (first, *warms) if answer.kind != "complete"]
        if refused:
            result_line(f"caps: {name}", f"refused: {refused[0].message[:200]}", "accepted", False)
            continue
        warm = statistics.median(answer.seconds for answer in warms)
        if budget is None:  # the first row is the largest linear /step
            budget = CAP_FACTOR * warm
            info_line(
                f"caps: {name} warm {warm:.2f} s (median of {WARM_CALLS}); 8 x = {budget:.2f} s"
            )
        result_line(  # the first call's compile is a one-off: shown, not capped
            f"caps: {name} time",
            f"first {first.seconds:.2f} s, warm {warm:.2f} s",
            f"warm <= {CAP_FACTOR:.0f} x largest linear /step warm = {budget:.2f} s",
            warm <= budget,
        )
        result_line(
            f"caps: {name} peak memory added", f"{added:.0f} MB", "<= 1024 MB", added <= 1024
        )


# ---- a fair share per visitor -------------------------------------------------------------


def fair_share(url: str) -> None:
    """One visitor sends 300 of the largest accepted MLP /step calls, 8 raw joins of the page's
    commit event and 10 training runs with rotated left-hand X-Forwarded-For values (the app
    runs with PLAYGROUND_TRUSTED_PROXIES=1); meanwhile another visitor's /step and commit
    (10 each) answer within 3 s with no 503, and its sweep waits only for the runs admitted."""
    import uuid

    from http_calls import commit_inputs, fn_index, join, request_body

    mlp_inputs = next(
        inputs for name, api, inputs in largest_requests() if "/step largest MLP" in name
    )
    commit = fn_index(url, "on_commit")
    statuses: dict[int, int] = {}
    flooder = "192.0.2.66"
    run = api_inputs("dynamics", MEDIUM | {"steps": 200})

    def flood_once() -> None:
        with httpx.Client(timeout=60) as client:

            def post(path: str, content: str, forwarded: str) -> None:
                response = client.post(
                    f"{url}gradio_api/{path}",
                    content=content,
                    headers={"content-type": "application/json", "X-Forwarded-For": forwarded},
                )
                statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

            for index in range(10):
                post("call/dynamics", request_body(run), f"192.0.2.{100 + index}, {flooder}")
            for _ in range(8):
                body = {
                    "data": commit_inputs(mlp_inputs, url),
                    "fn_index": commit,
                    "session_hash": uuid.uuid4().hex[:11],
                }
                post("queue/join", httpx.Request("POST", url, json=body).content.decode(), flooder)
            for _ in range(300):
                post("call/step", request_body(mlp_inputs), flooder)
                time.sleep(0.02)

    must(attempt(url, "step", mlp_inputs, visitor(flooder), timeout=CALL_TIMEOUT), "warm MLP")
    thread = threading.Thread(target=flood_once, daemon=True)
    thread.start()
    time.sleep(0.5)
    who = visitor("198.51.100.7")
    steps, commits = [], []
    for index in range(10):
        steps.append(attempt(url, "step", DEFAULT_STEP, who, timeout=60))
        commits.append(
            join(
                url,
                commit,
                commit_inputs(DEFAULT_STEP, url),
                who,
                session_hash=f"bench{index}",
                timeout=60,
            )
        )
    sweep = attempt(url, "sweep", DEFAULT_STEP, who, timeout=CALL_TIMEOUT)
    thread.join(CALL_TIMEOUT)
    for name, answers in (("/step", steps), ("page commit", commits)):
        worst = max(answer.seconds for answer in answers)
        bad = [a for a in answers if a.kind != "complete" or a.status == 503]
        result_line(
            f"fair share: the honest visitor's {name}, slowest of {len(answers)}",
            f"{worst:.2f} s, {len(bad)} not answered",
            "<= 3 s, all answered",
            worst <= LATENCY_TARGET and not bad,
        )
    result_line(
        "fair share: the honest visitor's sweep during the flood",
        f"{sweep.seconds:.1f} s ({sweep.kind})",
        "answered, no backlog (<= 30 s)",
        sweep.kind == "complete" and sweep.seconds <= 30,
    )
    result_line(
        "fair share: the flooding visitor's 318 requests",
        str(dict(sorted(statuses.items()))),
        "only 200 and 429",
        set(statuses) <= {200, 429},
    )


CROWD_ADDRESSES = [f"{net}.{host}" for net in ("192.0.2", "198.51.100") for host in range(100, 135)]
CROWD_SENDERS = 14


def crowd(url: str) -> None:
    """A crowd of CROWD_ADDRESSES visitors, each sending three large /step calls and a sweep
    (within its own share; the server-wide limits refuse the rest with 429); meanwhile another
    visitor's /step and page commit, 3 each: their slowest against LATENCY_TARGET."""
    from http_calls import commit_inputs, fn_index, join, request_body

    crowd_step = args(n=1024, d_in=512, d_out=512)
    small_sweep = args(n=64, d_in=16, d_out=4, compute_dtype="float16")
    log(f"crowd: {len(CROWD_ADDRESSES)} visitors x 4 heavy requests")
    must(attempt(url, "step", crowd_step, visitor(CROWD_ADDRESSES[0])), "warm crowd step")
    commit = fn_index(url, "on_commit")
    statuses: dict[int, int] = {}
    lock = threading.Lock()

    def send(addresses: list[str]) -> None:
        with httpx.Client(timeout=60) as client:
            for address in addresses:
                for api, data in (("step", crowd_step),) * 3 + (("sweep", small_sweep),):
                    response = client.post(
                        f"{url}gradio_api/call/{api}",
                        content=request_body(data),
                        headers={"content-type": "application/json", **visitor(address)},
                    )
                    with lock:
                        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1

    senders = [
        threading.Thread(target=send, args=(CROWD_ADDRESSES[start::CROWD_SENDERS],), daemon=True)
        for start in range(CROWD_SENDERS)
    ]
    for thread in senders:
        thread.start()
    time.sleep(0.5)
    who = visitor("198.51.100.7")
    answers: list[tuple[str, Answer]] = []
    for index in range(3):
        answers.append(("/step", attempt(url, "step", DEFAULT_STEP, who, timeout=60)))
        inputs = commit_inputs(DEFAULT_STEP, url)
        answers.append(("page commit", join(url, commit, inputs, who, session_hash=f"c{index}")))
    for thread in senders:
        thread.join(CALL_TIMEOUT)
    for name in ("/step", "page commit"):
        mine = [answer for kind, answer in answers if kind == name]
        worst = max(answer.seconds for answer in mine)
        bad = [a for a in mine if a.kind != "complete" or a.status == 503]
        result_line(
            f"crowd: the honest visitor's {name}, slowest of {len(mine)}",
            f"{worst:.2f} s, {len(bad)} not answered",
            f"<= {LATENCY_TARGET:.0f} s, all answered",
            worst <= LATENCY_TARGET and not bad,
        )
    result_line(
        f"crowd: the crowd's {4 * len(CROWD_ADDRESSES)} requests",
        str(dict(sorted(statuses.items()))),
        "only 200 and 429",
        set(statuses) <= {200, 429},
    )


def wait_for_warm_up(server: AppServer, timeout: float = 900.0) -> None:
    """Block until the server's start-up warm-up (ui.warm_up) has ended: its compiles would
    slow the first requests measured."""
    from playground.ui.warm_up import DONE

    deadline = time.monotonic() + timeout
    while DONE not in server.log_path.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {DONE!r} in {server.log_path} after {timeout:.0f} s")
        time.sleep(0.5)
    info_line(
        f"server: {server.log_path.read_text(errors='replace').split(DONE)[1].split()[1]} s warm-up"
    )


# ---- the page's defaults, and a soak of more programs than one shape --------------------------

SOAK_DTYPES = ("bfloat16", "float16", "float8")
SOAK_SIZES = tuple(range(248, 256))
SOAK_PROGRAMS = len(SOAK_DTYPES) * len(SOAK_SIZES)
SOAK_ROUNDS, SOAK_MB = 12, 10.0


def default_combinations() -> list[tuple[str, dict[str, Any]]]:
    """(endpoint, settings) of every endpoint x model x recipe at the page's defaults."""
    from playground.core.model.models import MODELS
    from playground.core.recipes.registry import COMPUTE_DTYPES

    return [
        (api, {"model": model, "compute_dtype": dtype})
        for api in ("step", "dynamics", "sweep")
        for model in MODELS
        for dtype in COMPUTE_DTYPES
    ]


def first_calls(server: AppServer, rows, warm: bool) -> None:
    """Each row's first call (and, when ``warm``, the median of two more) on ``server``."""
    who = visitor("192.0.2.203")
    with httpx.Client(timeout=CALL_TIMEOUT) as http:
        for api, settings in rows:
            inputs = api_inputs(api, settings)
            first = attempt(server.url, api, inputs, who, http, timeout=CALL_TIMEOUT)
            name = f"/{api} {settings['model']} {settings['compute_dtype']}"
            if first.kind != "complete":
                result_line(
                    f"defaults: {name}", f"{first.kind}: {first.message[:160]}", "answered", False
                )
                continue
            if not warm:
                info_line(f"defaults after restart: {name} first {first.seconds:.2f} s")
                continue
            warms = [
                attempt(server.url, api, inputs, who, http, timeout=CALL_TIMEOUT) for _ in range(2)
            ]
            middle = statistics.median(answer.seconds for answer in warms)
            info_line(f"defaults: {name} first {first.seconds:.2f} s, warm {middle:.3f} s")


def defaults_mode() -> None:
    """The 36 default combinations, cold, then on a restarted server reading the disk cache."""
    import tempfile

    rows = default_combinations()
    with tempfile.TemporaryDirectory(prefix="bench-compile-cache-") as cache:
        os.environ |= {"PLAYGROUND_WARM_UP": "0", "PLAYGROUND_COMPILE_CACHE": cache}
        os.environ.pop("JAX_COMPILATION_CACHE_DIR", None)
        for warm in (True, False):
            server = AppServer(log_name="bench_load_server.log")
            try:
                server.start()
                began = time.perf_counter()
                first_calls(server, rows, warm)
                took = time.perf_counter() - began
                label = "cold" if warm else "after restart"
                info_line(f"defaults {label}: {len(rows)} combinations in {took:.0f} s")
            finally:
                server.stop()


def soak_mode() -> None:
    """A cycle of SOAK_PROGRAMS /step programs against one shape's p50 (see the rule)."""
    # no warm-up, and no disk cache: an evicted program compiles again, as a thrash would
    os.environ |= {"PLAYGROUND_WARM_UP": "0", "PLAYGROUND_COMPILE_CACHE": "0"}
    server = AppServer(log_name="bench_load_server.log")
    who = visitor("192.0.2.204")
    try:
        server.start()
        pid = server.process.pid
        with httpx.Client(timeout=CALL_TIMEOUT) as http:
            one = api_inputs("step", {})
            must(attempt(server.url, "step", one, who, http), "/step")
            single = [
                attempt(server.url, "step", one, who, http).seconds
                for _ in range(SOAK_PROGRAMS * 4)
            ]
            cycle = [
                api_inputs("step", {"compute_dtype": dtype, "n": n})
                for dtype in SOAK_DTYPES
                for n in SOAK_SIZES
            ]
            before = settled_rss(pid)
            mixed, rss = [], []
            for round_ in range(SOAK_ROUNDS):
                seconds = [
                    must(attempt(server.url, "step", inputs, who, http), "/step").seconds
                    for inputs in cycle
                ]
                if round_ == 0:
                    compiled_mb = (settled_rss(pid) - before) / SOAK_PROGRAMS
                else:
                    mixed += seconds
                rss.append(settled_rss(pid))
                middle = statistics.median(seconds)
                log(f"soak: round {round_ + 1}/{SOAK_ROUNDS}, p50 {middle:.3f} s")
        p50, p50_single = statistics.median(mixed), statistics.median(single)
        result_line(
            f"soak: p50 of a cycle of {SOAK_PROGRAMS} /step programs (rounds 2-{SOAK_ROUNDS}) "
            f"vs one shape's p50",
            f"{p50 * 1000:.0f} ms vs {p50_single * 1000:.0f} ms ({p50 / p50_single:.2f} x; p99 "
            f"{percentile(mixed, 0.99) * 1000:.0f} ms)",
            "<= 2 x",
            p50 <= 2 * p50_single,
        )
        half = rss[len(rss) // 2 - 1]
        result_line(
            f"soak: RSS over the second half (rounds {len(rss) // 2}-{len(rss)})",
            f"{half:.0f} -> {rss[-1]:.0f} MB ({rss[-1] - half:+.1f} MB)",
            f"within {SOAK_MB:g} MB",
            abs(rss[-1] - half) <= SOAK_MB,
        )
        info_line(f"soak: the first round's compiles added {compiled_mb:.1f} MB a program")
    finally:
        server.stop()


MODES = ("all", "shares", "memory", "class", "defaults", "soak")


def main() -> None:
    modes = set(sys.argv[1:]) or {"all"}
    if not modes <= set(MODES) or (len(modes) > 1 and modes & {"defaults", "soak"}):
        sys.exit(f"modes: one of {', '.join(MODES)}, or several of all, shares, memory, class")
    if modes & {"defaults", "soak"}:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        (defaults_mode if "defaults" in modes else soak_mode)()
        return
    began = time.perf_counter()
    # A terminated bench still stops its server (the finally below runs on SystemExit).
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    os.environ["PLAYGROUND_TRUSTED_PROXIES"] = "1"  # the visitor: the right-hand entry
    os.environ["PLAYGROUND_WARM_UP"] = "1"  # as served: shared programs warmed at start
    server = AppServer(log_name="bench_load_server.log")
    try:
        log("starting python app.py")
        server.start()
        wait_for_warm_up(server)
        pid = server.process.pid
        info_line(f"server: pid {pid}, RSS at start {rss_mb(pid):.0f} MB, {os.cpu_count()} CPUs")
        if modes & {"all", "memory"}:
            memory(server.url, pid)
        if "all" in modes:
            mixed_calls(server.url, pid)
        if modes & {"all", "shares", "class"}:
            a_class(server.url, sessions=True)
            a_class(server.url, sessions=False)
        if modes & {"all", "shares"}:
            flood(server.url)
            fair_share(server.url)
            crowd(server.url)
        if "all" in modes:
            work_caps(server)
    finally:
        server.stop()
    log(f"done in {time.perf_counter() - began:.0f} s")


if __name__ == "__main__":
    main()
