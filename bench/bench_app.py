"""Round-trip times of the running app, measured through gradio_client like an API user.

Usage: ``python bench/bench_app.py [--rounds 30]``

Launches ``python app.py`` on a free local port (tests/app_server.py), then reports:
  - the time from process start to the first served ``/step`` result (imports, JAX start-up,
    the first compilation and the first request);
  - median warm round trips of ``/step`` at the default shape and of the trivial ``/ping``,
    interleaved so both see the same machine load, and their ratio (target: step <= 1.5 x ping,
    i.e. the step's own work is small next to Gradio's request overhead);
  - the step handler's own time in this process, to show its share of the round trip;
  - ``/step`` at the largest shape, first call (compiles) and one warm call, for information.

Prints numbers only; it never fails on a time. The server process is always stopped.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests"))

from gradio_client import Client  # noqa: E402

from app_server import AppServer  # noqa: E402
from playground.core.settings.settings import defaults, settings  # noqa: E402
from playground.ui.arguments import STEP  # noqa: E402
from playground.ui.endpoints import run_step  # noqa: E402

TARGET_RATIO = 1.5
WARMUP = 5


def _timed(call) -> float:
    """Seconds one call takes."""
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="warm calls of each endpoint")
    args = parser.parse_args()

    default = defaults()
    default_args = [default[name] for name in STEP.before_data]
    shape = "x".join(str(default[name]) for name in ("n", "d_in", "d_out"))
    largest = {name: int(settings()[name].high) for name in ("n", "d_in", "d_out")}
    largest_args = [(default | largest)[name] for name in STEP.before_data]
    largest_shape = "x".join(str(largest[name]) for name in ("n", "d_in", "d_out"))

    def step(values=default_args):
        result = client.predict(*values, api_name="/step")
        if not isinstance(result, (tuple, list)) or "losses" not in result[1]:
            raise RuntimeError(f"unexpected /step result: {result!r:.200}")

    def ping():
        if client.predict(api_name="/ping") != "pong":
            raise RuntimeError("/ping did not answer pong")

    server = AppServer(log_name="bench_app_server.log")
    try:
        server.start()
        served_page = time.perf_counter() - server.started_at
        client = Client(server.url, verbose=False)
        step()
        first_result = time.perf_counter() - server.started_at
        print(f"process start to page served (GET /): {served_page:.2f} s")
        print(f"process start to first served /step result ({shape}): {first_result:.2f} s")

        for _ in range(WARMUP):
            step()
            ping()
        step_times, ping_times = [], []
        for _ in range(args.rounds):
            step_times.append(_timed(step))
            ping_times.append(_timed(ping))
        step_ms, ping_ms = statistics.median(step_times), statistics.median(ping_times)
        ratio = step_ms / ping_ms
        verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
        print(
            f"step endpoint warm round trip (default shape {shape}): {_ms(step_ms)} "
            f"(median of {args.rounds}; min {_ms(min(step_times))}, max {_ms(max(step_times))})"
        )
        print(
            f"ping endpoint warm round trip: {_ms(ping_ms)} "
            f"(median of {args.rounds}; min {_ms(min(ping_times))}, max {_ms(max(ping_times))})"
        )
        print(f"ratio step/ping: {ratio:.2f} (target <= {TARGET_RATIO}: {verdict})")
        # Where the step's round trip goes: its handler alone, in this process.
        run_step(*default_args)
        handler = statistics.median(_timed(lambda: run_step(*default_args)) for _ in range(30))
        print(
            f"step handler in-process (report + figures + summary), default shape: "
            f"{_ms(handler)} ({handler / step_ms:.0%} of the round trip)"
        )

        first_large = _timed(lambda: step(largest_args))
        warm_large = _timed(lambda: step(largest_args))
        print(f"step endpoint at the largest shape {largest_shape}, first call: {_ms(first_large)}")
        print(f"step endpoint at the largest shape {largest_shape}, warm call: {_ms(warm_large)}")
    finally:
        server.stop()
    code = server.process.returncode if server.process else None
    print(f"server stopped (exit code {code})")


if __name__ == "__main__":
    main()
