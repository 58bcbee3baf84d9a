"""Timings of the numerical core: the eager spec step, its jitted form and the compiled report.

Run ``python bench/bench_core.py`` from anywhere. For three shapes (N, D_in, D_out), small,
medium and the largest the settings table allows, it prints:

* first calls at a shape new to both code paths: the eager ``mixed_precision_step`` and
  ``run_report`` (which compiles ``_both_steps`` once per shape; its batch is generated in the
  call);
* warm medians, timed in alternation so the load of a shared machine hits them alike: the eager
  step, ``jax.jit(mixed_precision_step, static_argnums=0)``, and ``run_report`` with its batch
  cached and with the batch generated in every call;
* this machine's float32 matmul throughput at the shape and the report's lower bound: its six
  matmuls of 2 * N * D_in * D_out flops each, divided by that throughput;
* the ratios against their targets, marked PASS or MISS. A miss is reported, never raised:
  this is a measurement, not a test, and timings on a shared machine are noisy.
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import playground
import playground.core.data.synthetic
from playground.core.settings.settings import StepConfig, settings

Shape = tuple[int, int, int]

THROWAWAY_SHAPE: Shape = (7, 3, 2)  # warms both code paths once, outside every measurement
LR_CYCLE = (0.1, 0.05, 0.02)  # report calls cycle lr, so no two consecutive calls are identical
MIN_REPEATS = 3  # timed calls per warm median, at least
MAX_REPEATS = 15  # and at most
BUDGET_S = 1.5  # per timed code path: no new round past this (once MIN_REPEATS are done)
BLOCK_S = 0.005  # consecutive calls per variant and round: as many as fit in this time
MAX_BLOCK = 50
MATMUL_REPEATS = 7  # best of this many runs of the jitted x @ w
MATMULS_PER_REPORT = 6  # forward, kernel gradient, post-update forward; mixed and float32 paths

EAGER_OVER_REPORT_MIN = 30.0  # at the small shape
REPORT_OVER_EAGER_FIRST_MAX = 0.6  # at every shape
REPORT_OVER_BOUND_MAX = 2.0  # at the largest shape


class ShapeResult(NamedTuple):
    """Seconds measured at one shape, and the matmul throughput in GFLOP/s."""

    name: str
    shape: Shape
    eager_first: float
    report_first: float
    eager_warm: float
    jit_warm: float
    report_warm_cached: float
    report_warm_fresh: float
    gflops: float
    bound: float


def shapes() -> list[tuple[str, Shape]]:
    """The named shapes to measure; the largest is read from the settings table."""
    table = settings()
    largest = (int(table["n"].high), int(table["d_in"].high), int(table["d_out"].high))
    return [("small", (32, 8, 4)), ("medium", (1024, 256, 128)), ("largest", largest)]


def config_for(shape: Shape, lr: float = LR_CYCLE[0]) -> StepConfig:
    """The default config at ``shape`` with learning rate ``lr``."""
    n, d_in, d_out = shape
    return StepConfig(n=n, d_in=d_in, d_out=d_out, lr=lr)


def time_call(call: Callable[[], Any]) -> float:
    """Seconds taken by ``call()``, including waiting for any JAX arrays it returns."""
    start = time.perf_counter()
    jax.block_until_ready(call())
    return time.perf_counter() - start


Timed = tuple[Callable[[int], Any], Callable[[], None] | None]  # call(i), untimed setup


def warm_medians(*variants: Timed) -> list[float]:
    """Median seconds per call of each variant's ``call(i)``, after untimed warm-up calls.

    Variants are timed in alternation, one block of calls of each per round, so a change in the
    load of a shared machine affects them alike. A block is as many consecutive calls as fit in
    BLOCK_S (at least one): a sub-millisecond call timed right after another variant's 10 ms of
    work would measure that work's cold caches, not the call's warm time. A variant's setup runs
    untimed before each of its calls. Between MIN_REPEATS and MAX_REPEATS rounds run, stopping
    once they took more than BUDGET_S per variant.
    """
    blocks = []
    for call, _ in variants:
        jax.block_until_ready(call(0))
        blocks.append(max(1, min(MAX_BLOCK, int(BLOCK_S / time_call(functools.partial(call, 0))))))
    rounds: list[list[float]] = []
    budget = BUDGET_S * len(variants)
    while len(rounds) < MAX_REPEATS and (
        len(rounds) < MIN_REPEATS or sum(map(sum, rounds)) < budget
    ):
        row = []
        for (call, before), block in zip(variants, blocks, strict=True):
            total = 0.0
            for index in range(block):
                if before is not None:
                    before()
                total += time_call(functools.partial(call, len(rounds) * block + index + 1))
            row.append(total / block)
        rounds.append(row)
    return [statistics.median(column) for column in zip(*rounds, strict=True)]


def eager_step(config: StepConfig) -> Callable[[], jax.Array]:
    """A no-argument call of the eager spec step on ``config``'s batch."""
    x, y = playground.make_batch(config)
    return lambda: playground.mixed_precision_step(
        config.model_seed, x, y, config.lr, config.loss_scale
    )


def report_call(shape: Shape) -> Callable[[int], playground.StepReport]:
    """``i -> run_report`` at ``shape`` with the i-th learning rate of LR_CYCLE."""
    configs = [config_for(shape, lr) for lr in LR_CYCLE]
    return lambda i: playground.run_report(configs[i % len(configs)])


def warm_up_once() -> None:
    """Run both code paths on a throwaway shape, so import and setup costs are not measured."""
    config = config_for(THROWAWAY_SHAPE)
    jax.block_until_ready(eager_step(config)())
    playground.run_report(config)


def first_calls(shape: Shape) -> tuple[float, float]:
    """Seconds of the first eager step and the first run_report at a new ``shape``.

    The eager step's batch is drawn before its timer starts; the cache is then cleared, so the
    report's first call includes generating its batch, as a new shape in the app does.
    """
    config = config_for(shape)
    eager = time_call(eager_step(config))
    playground.core.data.synthetic._draw.cache_clear()
    report = time_call(lambda: playground.run_report(config))
    return eager, report


def matmul_gflops(shape: Shape) -> float:
    """Best-of-MATMUL_REPEATS float32 GFLOP/s of a jitted ``x @ w`` at ``shape``."""
    n, d_in, d_out = shape
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((n, d_in), dtype=np.float32))
    w = jax.device_put(rng.standard_normal((d_in, d_out), dtype=np.float32))
    matmul = jax.jit(jnp.matmul)
    jax.block_until_ready(matmul(x, w))
    best = min(time_call(lambda: matmul(x, w)) for _ in range(MATMUL_REPEATS))
    return 2 * n * d_in * d_out / best / 1e9


def measure(name: str, shape: Shape) -> ShapeResult:
    """Every timing at one shape: first calls first, then warm medians, then the matmul bound.

    The report's batch-cached and batch-generating calls alternate, and the cache is cleared
    before each of the latter; the report cycles lr, which does not change its batch.
    """
    eager_first, report_first = first_calls(shape)
    config = config_for(shape)
    eager = eager_step(config)
    x, y = playground.make_batch(config)
    jit_step = jax.jit(playground.mixed_precision_step, static_argnums=0)
    report = report_call(shape)
    eager_warm, jit_warm, report_warm_cached, report_warm_fresh = warm_medians(
        (lambda i: eager(), None),
        (lambda i: jit_step(config.model_seed, x, y, config.lr, config.loss_scale), None),
        (report, None),
        (report, playground.core.data.synthetic._draw.cache_clear),
    )
    gflops = matmul_gflops(shape)
    n, d_in, d_out = shape
    bound = MATMULS_PER_REPORT * 2 * n * d_in * d_out / (gflops * 1e9)
    return ShapeResult(
        name,
        shape,
        eager_first,
        report_first,
        eager_warm,
        jit_warm,
        report_warm_cached,
        report_warm_fresh,
        gflops,
        bound,
    )


def ms(seconds: float) -> str:
    """Seconds as milliseconds with about three significant digits."""
    value = seconds * 1e3
    if value < 1:
        return f"{value:.3f} ms"
    if value < 100:
        return f"{value:.2f} ms"
    return f"{value:.0f} ms"


def label(result: ShapeResult) -> str:
    """``name NxD_inxD_out``, padded so the lines of all shapes align."""
    return f"{result.name:<7} {'x'.join(map(str, result.shape)):<14}"


def shape_lines(result: ShapeResult) -> list[str]:
    """The printed lines for one shape: first calls, warm medians, matmul bound."""
    first = [
        f"eager step {ms(result.eager_first)}",
        f"report {ms(result.report_first)} (incl. batch generation)",
        f"report/eager {result.report_first / result.eager_first:.2f}",
    ]
    warm = [
        f"eager step {ms(result.eager_warm)}",
        f"jit step {ms(result.jit_warm)}",
        f"report {ms(result.report_warm_cached)} (batch cached)",
        f"report {ms(result.report_warm_fresh)} (incl. batch generation)",
        f"eager/report(cached) {result.eager_warm / result.report_warm_cached:.1f}",
    ]
    bound = [
        f"f32 x@w {result.gflops:.3g} GFLOP/s (best of {MATMUL_REPEATS})",
        f"bound {MATMULS_PER_REPORT} matmuls {ms(result.bound)}",
        f"report(cached)/bound {result.report_warm_cached / result.bound:.1f}",
    ]
    head = label(result)
    return [
        f"{head} first call  " + " | ".join(first),
        f"{head} warm median " + " | ".join(warm),
        f"{head} matmul      " + " | ".join(bound),
    ]


def target_line(what: str, result: ShapeResult, ratio: float, op: str, target: float) -> str:
    """One target: the measured ratio, the target and PASS or MISS (never raised)."""
    met = ratio >= target if op == ">=" else ratio <= target
    verdict = "PASS" if met else "MISS"
    return f"  {what:<46} {label(result)} {ratio:8.2f}  target {op} {target:<4g} {verdict}"


def target_lines(results: list[ShapeResult]) -> list[str]:
    """The targets block: each ratio at the shapes its target applies to."""
    small, largest = results[0], results[-1]
    lines = ["targets (a MISS is a measurement, not a failure)"]
    lines.append(
        target_line(
            "eager_warm / report_warm (batch cached)",
            small,
            small.eager_warm / small.report_warm_cached,
            ">=",
            EAGER_OVER_REPORT_MIN,
        )
    )
    for result in results:
        lines.append(
            target_line(
                "report_first / eager_first",
                result,
                result.report_first / result.eager_first,
                "<=",
                REPORT_OVER_EAGER_FIRST_MAX,
            )
        )
    lines.append(
        target_line(
            "report_warm (batch cached) / matmul_bound",
            largest,
            largest.report_warm_cached / largest.bound,
            "<=",
            REPORT_OVER_BOUND_MAX,
        )
    )
    return lines


def main() -> None:
    """Measure every shape in one process and print the results."""
    print(f"jax {jax.__version__} | backend {jax.default_backend()} | cpu_count {os.cpu_count()}")
    start = time.perf_counter()
    warm_up_once()
    results = []
    for name, shape in shapes():
        result = measure(name, shape)
        results.append(result)
        for line in shape_lines(result):
            print(line, flush=True)
    for line in target_lines(results):
        print(line)
    print(f"total bench time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
