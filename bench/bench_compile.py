"""The first call's compile against the cost model's price of it (``core.settings.compile_cost``).

Run ``python bench/bench_compile.py`` from anywhere (about 4 minutes on 2 vCPUs; run it on a quiet
machine). For each endpoint (/step through the page's own step endpoint, /dynamics and /sweep
through the core), recipe and depth of MLP of width 1024 (D_in = D_out = 1024; a linear model is
depth 0), and the transformer block at its default width, at a small batch so that compute is small
against the compile, it times the first call (its programs trace and compile) and a warm call in
this process, and prints

    first-call overhead = first - warm (seconds)   against   the model's compile seconds

with ``covers`` when the model is at least the measured overhead (the model must not undercount
it: that is what keeps the slowest first call within its bound) and ``UNDER`` when it is below.
Every configuration gets a batch size of its own, so nothing is compiled before its first call
except what every shape shares (compiled by a warm-up call first).
"""

from __future__ import annotations

import itertools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import jax  # noqa: E402

from playground.core.settings import compile_cost  # noqa: E402
from playground.core.settings.settings import StepConfig  # noqa: E402
from playground.ui.warm_up import run as call  # noqa: E402  (the step via its endpoint)

WIDTH = 1024
# The transformer block at the page's defaults but for D_in = D_out (its width is d_model).
BLOCK = {"model": "transformer"}
# (endpoint, recipes, MLP depths (0: linear; "block": the transformer), extra settings)
GRID = (
    ("step", ("bfloat16", "float16", "float8", "mxfp8", "fp8_block", "nvfp4"), (0, 1, 3), {}),
    ("step", ("bfloat16",), (5,), {}),
    ("step", ("bfloat16",), (3,), {"norm": "layernorm", "task": "classification"}),
    ("step", ("bfloat16", "float16", "float8", "mxfp8", "fp8_block", "nvfp4"), ("block",), {}),
    ("dynamics", ("bfloat16", "float8", "mxfp8", "nvfp4"), (0, 1, 3, "block"), {}),
    ("sweep", ("bfloat16", "float8", "mxfp8", "nvfp4"), (0, 1, "block"), {}),
)
# The training run's worst case for compile: dynamic scaling, stochastic rounding.
RUN = {"mode": "dynamic", "pure_rounding": "stochastic", "steps": 1}


def timed(endpoint: str, config: StepConfig) -> float:
    start = time.perf_counter()
    call(endpoint, config)
    return time.perf_counter() - start


def main() -> None:
    print(f"jax {jax.__version__} | backend {jax.default_backend()} | cpu_count {os.cpu_count()}")
    for endpoint in ("step", "dynamics", "sweep"):  # what every shape shares
        run = RUN if endpoint == "dynamics" else {}
        call(endpoint, StepConfig(n=8, d_in=8, d_out=8, **run))
    under = 0
    batch = 15
    for endpoint, recipes, depths, extra in GRID:
        for dtype, depth in itertools.product(recipes, depths):
            batch += 1
            block = depth == "block"
            width = StepConfig().hidden_width if block else WIDTH
            settings = {"n": batch, "d_in": width, "d_out": width, "compute_dtype": dtype}
            settings |= {"optimizer": "adam", **extra}
            if block:
                settings |= BLOCK
            elif depth:
                settings |= {"model": "mlp", "hidden_layers": depth, "hidden_width": WIDTH}
            if endpoint == "dynamics":
                settings |= RUN
            config = StepConfig(**settings)
            first, warm = timed(endpoint, config), timed(endpoint, config)
            model = compile_cost.first_call_seconds(config, endpoint)
            verdict = "covers" if model >= first - warm else "UNDER"
            under += verdict == "UNDER"
            shape = "transformer" if block else f"mlp {depth}x{WIDTH}" if depth else "linear"
            print(
                f"{endpoint:>8} {dtype:>9} {shape:>12} {' '.join(extra.values()):>26} | first "
                f"{first:5.2f} s warm {warm:5.2f} s | overhead {first - warm:5.2f} s | model "
                f"{model:5.2f} s {verdict}"
            )
    print(f"model below the measured overhead: {under} configurations")


if __name__ == "__main__":
    main()
