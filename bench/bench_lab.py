"""Timings of the precision lab's loss-scale sweep and of the training-dynamics scan.

Run ``python bench/bench_lab.py``. At the medium shape (1024 x 256 x 128) it prints, measured in
this run: the sweep's first call and warm median for bfloat16 (S = 2^0 .. 2^127) and float16
(2^0 .. 2^16); K = 500 training steps' first call and warm median; and each warm time against
its matmul bound (matmul flops divided by this machine's peak float32 matmul throughput).
Targets (issue text): the sweep answers in about a second warm; 500 steps take a few seconds
warm and stay within 3x of the matmul bound. Misses are printed, never raised.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground.core.runs.sweep import run_sweep, sweep_exponents
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import StepConfig

MEDIUM = StepConfig(n=1024, d_in=256, d_out=128)
# 500 steps, or as many as the cost model lets a run of MEDIUM take (its first call's compile
# counts against its budget: core.settings.compile_cost)
STEPS = min(500, MEDIUM.max_steps)
# The least matmul work the sweep needs: the forward pass at the initial weights does not
# depend on S, so each scale needs at least a kernel gradient and a post-update forward; plus
# that shared forward and the float32 baseline's three. (Counting less work makes the bound
# smaller and the printed ratio larger, never flattering.)
MATMULS_PER_SCALE = 2
MATMULS_SHARED = 4
PEAK_SHAPE = (4096, 1024, 1024)  # large enough for the matmul library's best throughput
MATMULS_PER_TRAINING_STEP = 8  # float32: 2; mixed and pure: loss, forward, kernel gradient


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    jax.block_until_ready(call())
    return time.perf_counter() - start


def warm_median(call: Callable[[], object], repeats: int = 5) -> float:
    return statistics.median(timed(call) for _ in range(repeats))


def matmul_gflops() -> float:
    """This machine's float32 matmul throughput: best of 7 jitted x @ w at PEAK_SHAPE, GFLOP/s."""
    n, d_in, d_out = PEAK_SHAPE
    x = jnp.ones((n, d_in), jnp.float32)
    w = jnp.ones((d_in, d_out), jnp.float32)
    product = jax.jit(jnp.matmul)
    product(x, w).block_until_ready()
    best = min(timed(lambda: product(x, w)) for _ in range(7))
    return 2 * n * d_in * d_out / best / 1e9


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def main() -> None:
    print(f"jax {jax.__version__} | cpu_count {os.cpu_count()} | shape {MEDIUM.shape}")
    gflops = matmul_gflops()
    matmul_flops = 2 * MEDIUM.n * MEDIUM.d_in * MEDIUM.d_out
    print(f"float32 matmul throughput (x @ w at {PEAK_SHAPE}): {gflops:.0f} GFLOP/s")
    for dtype in ("bfloat16", "float16"):
        config = MEDIUM.replace(compute_dtype=dtype)
        scales = len(sweep_exponents(dtype))
        first = timed(lambda config=config: run_sweep(config).rel_error)
        warm = warm_median(lambda config=config: run_sweep(config.replace(lr=0.05)).rel_error)
        matmuls = scales * MATMULS_PER_SCALE + MATMULS_SHARED
        bound = matmuls * matmul_flops / (gflops * 1e9)
        print(
            f"sweep {dtype:8s} {scales:3d} scales: first call {first * 1e3:7.0f} ms | warm "
            f"{warm * 1e3:6.0f} ms (target about 1 s: {verdict(warm <= 1.5)}) | "
            f"warm / matmul bound {warm / bound:.2f}"
        )
    first = timed(lambda: run_dynamics(MEDIUM, STEPS).float32_loss)
    warm = warm_median(lambda: run_dynamics(MEDIUM.replace(lr=0.05), STEPS).float32_loss, 3)
    bound = STEPS * MATMULS_PER_TRAINING_STEP * matmul_flops / (gflops * 1e9)
    print(
        f"dynamics K={STEPS}: first call {first * 1e3:.0f} ms | warm {warm * 1e3:.0f} ms "
        f"(target a few seconds: {verdict(warm <= 5)}) | matmul bound {bound * 1e3:.0f} ms | "
        f"warm / bound {warm / bound:.2f} (target <= 3: {verdict(warm / bound <= 3)})"
    )


if __name__ == "__main__":
    main()
