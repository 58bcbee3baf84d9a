"""What the benches share: a median wall time, and this machine's float32 matmul throughput (the
denominator of every "matmul bound": a report's least matmul FLOPs over it)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp


def timed(call: Callable[[], object], repeats: int = 1) -> float:
    """The median wall time of ``repeats`` calls, in seconds (JAX results waited for)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(call())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def peak_matmul_flops() -> float:
    """Best of 7 float32 (4096 x 1024) @ (1024 x 1024) products, in FLOP/s."""
    a = jnp.ones((4096, 1024), jnp.float32)
    b = jnp.ones((1024, 1024), jnp.float32)
    product = jax.jit(lambda a, b: a @ b)
    product(a, b).block_until_ready()
    best = min(timed(lambda: product(a, b)) for _ in range(7))
    return 2 * 4096 * 1024 * 1024 / best
