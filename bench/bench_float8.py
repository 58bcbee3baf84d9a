"""The float8 report against its matmul bound, at the largest shape, in one run.

Run ``python bench/bench_float8.py`` from anywhere. At the largest shape the settings table
allows (4096 x 1024 x 1024) it prints:

* the first call of the float8 report (current scaling), which compiles it;
* warm medians of the bfloat16 and the float8 report (batch cached), timed in alternation so
  the load of a shared machine hits them alike (``bench_core.warm_medians``);
* this machine's float32 matmul throughput and the bound it gives: the report's six matmuls
  (forward, kernel gradient, post-update forward; mixed and float32 paths) of 2 N D_in D_out
  flops each. A float8 matmul on CPU is that float32 matmul: XLA widens the float8 operands
  inside the dot, so its extra work is elementwise (scale, clip, cast, the statistics);
* the ratios against the target (float8 report / bound <= 2), PASS or MISS, never raised.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_core import (  # noqa: E402 (after the path set-up above)
    LR_CYCLE,
    MATMULS_PER_REPORT,
    matmul_gflops,
    ms,
    shapes,
    time_call,
    warm_medians,
)

import playground  # noqa: E402
from playground.core.settings.settings import StepConfig  # noqa: E402

FLOAT8_OVER_BOUND_MAX = 2.0  # the bfloat16 report's own target at this shape


def configs(shape: tuple[int, int, int], **changes) -> list[StepConfig]:
    """The default config at ``shape`` with ``changes``, once per learning rate of LR_CYCLE."""
    n, d_in, d_out = shape
    return [StepConfig(n=n, d_in=d_in, d_out=d_out, lr=lr, **changes) for lr in LR_CYCLE]


def main() -> None:
    print(f"jax {jax.__version__} | backend {jax.default_backend()} | cpu_count {os.cpu_count()}")
    start = time.perf_counter()
    _, largest = shapes()[-1]
    bfloat16 = configs(largest)
    float8 = configs(largest, compute_dtype="float8", fp8_scaling="current")
    float8_first = time_call(lambda: playground.run_report(float8[0]))
    bfloat16_warm, float8_warm = warm_medians(
        (lambda i: playground.run_report(bfloat16[i % len(bfloat16)]), None),
        (lambda i: playground.run_report(float8[i % len(float8)]), None),
    )
    gflops = matmul_gflops(largest)
    n, d_in, d_out = largest
    bound = MATMULS_PER_REPORT * 2 * n * d_in * d_out / (gflops * 1e9)
    shape = "x".join(map(str, largest))
    print(f"largest {shape} float8 report first call {ms(float8_first)} (compiles)")
    print(
        f"largest {shape} warm median bfloat16 report {ms(bfloat16_warm)} | float8 report "
        f"{ms(float8_warm)} | float8/bfloat16 {float8_warm / bfloat16_warm:.2f}"
    )
    print(
        f"largest {shape} matmul f32 x@w {gflops:.3g} GFLOP/s | bound {MATMULS_PER_REPORT} "
        f"matmuls {ms(bound)}"
    )
    for name, seconds in (("bfloat16", bfloat16_warm), ("float8", float8_warm)):
        ratio = seconds / bound
        verdict = "PASS" if ratio <= FLOAT8_OVER_BOUND_MAX else "MISS"
        print(
            f"  {name} report warm / matmul bound {shape} {ratio:8.2f}  target <= "
            f"{FLOAT8_OVER_BOUND_MAX:g} {verdict}"
        )
    print(f"total bench time {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
