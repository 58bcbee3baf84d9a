"""Block-scaled matmuls against their float32 matmul bound and against per-tensor float8.

Run ``python bench/bench_blocks.py`` from anywhere. At the largest shape the settings table
allows (N x D_in x D_out; the caps of ``core.caps``) it prints, all measured in one run:

* this machine's float32 matmul throughput and the bound it gives for one matmul's forward and
  backward: three matmuls (out, d_x, d_w) of 2 N D_in D_out flops each;
* warm medians of the compiled forward + backward (``jax.vjp``, both gradients) of the plain
  float32 matmul, per-tensor float8 (``core.recipes.float8``, current scaling) and every block
  recipe
  (``core.recipes.block_formats.BLOCK_RECIPES``; NVFP4 with and without its Hadamard transform),
  timed in alternation (``bench_core.warm_medians``);
* each one's ratio to the bound (target <= 2.5, PASS or MISS, never raised), to the measured
  float32 forward + backward, and to per-tensor float8. On CPU every block recipe is emulated:
  its extra work over the float32 matmuls is the element-wise quantization (amax per block,
  scale, clip, cast; random draws for stochastic rounding; the Hadamard rotation is a small
  matmul);
* each recipe's whole report (``playground.run_report``: the mixed step, its float32 twin and
  every statistic) against the report's matmul bound (``report_matmuls``: a block recipe's
  comparison adds the per-tensor float8 product; the ratio to the steps' matmuls alone is
  printed too) and against the per-tensor float8 report, and for a block recipe the part of
  it its block report takes beside the step (``core.recipes.block_report``'s ``measure`` without the
  comparison, on the same batch and first kernel: one compiled program of counts and scales,
  then ``report_from`` on the host; the comparison's products are measured in the step's own
  program, which shares two of the three with the step), all timed in alternation.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_core import (  # noqa: E402
    LR_CYCLE,
    MATMULS_PER_REPORT,
    matmul_gflops,
    ms,
    shapes,
    time_call,
    warm_medians,
)

import playground  # noqa: E402
from playground.core.data.synthetic import make_batch  # noqa: E402
from playground.core.recipes.block_formats import BLOCK_RECIPES  # noqa: E402
from playground.core.recipes.block_matmul import block_matmul, empty_meta, matmul_path  # noqa: E402
from playground.core.recipes.block_report import measure, report_from  # noqa: E402
from playground.core.recipes.float8 import float8_matmul  # noqa: E402
from playground.core.recipes.registry import recipe as compute_recipe
from playground.core.settings.settings import ConfigError, StepConfig  # noqa: E402

BLOCK_OVER_BOUND_MAX = 2.5
MATMULS_PER_PASS = 3  # out, d_x, d_w


def forward_and_back(matmul):
    """A compiled (x, w, g) -> (out, d_x, d_w) of ``matmul(x, w)``."""

    def run(x, w, g):
        out, pullback = jax.vjp(matmul, x, w)
        return (out, *pullback(g))

    return jax.jit(run)


def plain(x, w):
    return jnp.dot(x, w, precision=jax.lax.Precision.HIGHEST)


def variants() -> dict[str, object]:
    """Name -> compiled forward + backward, the float32 matmul and per-tensor float8 first."""
    key = jax.random.key(0)
    found = {
        "float32": forward_and_back(plain),
        "per-tensor float8": forward_and_back(
            lambda x, w: float8_matmul(x, w, empty_meta(), "current")
        ),
    }
    for recipe in BLOCK_RECIPES.values():
        settings = (True, False) if recipe.hadamard_block else (False,)
        for hadamard in settings:
            name = recipe.name + (" hadamard" if hadamard else "")
            found[name] = forward_and_back(
                lambda x, w, r=recipe, h=hadamard: block_matmul(
                    x, w, empty_meta(), key, r, h, False
                )
            )
    return found


def main() -> None:
    print(f"jax {jax.__version__} | backend {jax.default_backend()} | cpu_count {os.cpu_count()}")
    start = time.perf_counter()
    _, largest = shapes()[-1]
    n, d_in, d_out = largest
    shape = "x".join(map(str, largest))
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((n, d_in), dtype=np.float32))
    w = jax.device_put(rng.standard_normal((d_in, d_out), dtype=np.float32) / np.sqrt(d_in))
    g = jax.device_put(rng.standard_normal((n, d_out), dtype=np.float32) * 1e-3)
    programs = variants()
    for name, program in programs.items():
        print(
            f"largest {shape} {name:>18} first call {ms(time_call(lambda p=program: p(x, w, g)))}"
        )
    warm = warm_medians(*[((lambda i, p=p: p(x, w, g)), None) for p in programs.values()])
    timings = dict(zip(programs, warm, strict=True))
    gflops = matmul_gflops(largest)
    bound = MATMULS_PER_PASS * 2 * n * d_in * d_out / (gflops * 1e9)
    print(
        f"largest {shape} matmul f32 x@w {gflops:.3g} GFLOP/s | bound {MATMULS_PER_PASS} "
        f"matmuls {ms(bound)}"
    )
    float8, float32 = timings["per-tensor float8"], timings["float32"]
    for name, seconds in timings.items():
        ratio = seconds / bound
        verdict = "PASS" if ratio <= BLOCK_OVER_BOUND_MAX else "MISS"
        print(
            f"  {name:>18} fwd+bwd warm {ms(seconds)} | / bound {ratio:6.2f} target <= "
            f"{BLOCK_OVER_BOUND_MAX:g} {verdict} | / float32 {seconds / float32:5.2f} | "
            f"/ per-tensor float8 {seconds / float8:5.2f}"
        )
    print(f"path: {matmul_path(BLOCK_RECIPES['mxfp8'])}")
    report_rows(largest, gflops)
    print(f"total {time.perf_counter() - start:.1f} s")


def largest_accepted_n(n: int, d_in: int, d_out: int, dtype: str) -> int:
    """The largest N up to ``n`` that the cost model accepts for ``dtype`` at D_in x D_out (its
    first call's compile counts against the step's budget)."""
    for rows in range(n, 0, -1):
        try:
            StepConfig(n=rows, d_in=d_in, d_out=d_out, compute_dtype=dtype)
            return rows
        except ConfigError:
            continue
    raise ValueError(f"no N is accepted for {dtype} at {d_in} x {d_out}")


def block_part(compute, x, kernel):
    """What a block recipe's step report computes beside the step: its block measurements
    (without the comparison, which the step's program measures) and the BlockReport on the
    host (here with the comparison's row norms of zeros in their place)."""
    return report_from(compute, measure(compute, x, kernel, compare=False), np.zeros((3, 1)))


def report_rows(largest: tuple[int, int, int], gflops: float) -> None:
    """Each recipe's whole report (the mixed step, its float32 twin and every statistic the
    page shows) at the largest shape it accepts (``largest``, or a smaller N where the cost
    model refuses it), warm, against the report's matmul bound at that shape and against the
    per-tensor float8 report, and a block recipe's block report on its own, timed in
    alternation in this run."""
    n, d_in, d_out = largest
    recipes = ("float8", *BLOCK_RECIPES)
    rows = {name: largest_accepted_n(n, d_in, d_out, name) for name in recipes}
    configs = {
        name: [
            StepConfig(n=rows[name], d_in=d_in, d_out=d_out, lr=lr, compute_dtype=name)
            for lr in LR_CYCLE
        ]
        for name in recipes
    }
    first_layers = {}
    for name in recipes:
        report = playground.run_report(configs[name][0])  # compiled before timing
        if name in BLOCK_RECIPES:
            x = make_batch(configs[name][0])[0]
            first_layers[name] = (compute_recipe(name), x, report.kernel.before)
    calls = [(lambda i, c=configs[name]: playground.run_report(c[i % len(c)])) for name in recipes]
    calls += [(lambda i, a=args: block_part(*a)) for args in first_layers.values()]
    warm = warm_medians(*[(call, None) for call in calls])
    timings = dict(zip(recipes, warm, strict=False))
    parts = dict(zip(first_layers, warm[len(recipes) :], strict=True))
    for name, seconds in timings.items():
        matmuls = report_matmuls(name)
        bound = matmuls * 2 * rows[name] * d_in * d_out / (gflops * 1e9)
        steps_bound = bound * MATMULS_PER_REPORT / matmuls
        ratio = seconds / bound
        verdict = "PASS" if ratio <= BLOCK_OVER_BOUND_MAX else "MISS"
        extra = (
            f" | / the steps' {MATMULS_PER_REPORT} alone {seconds / steps_bound:5.2f}"
            f" | block report part {ms(parts[name])} ({parts[name] / bound:4.2f} of the bound)"
            if name in parts
            else ""
        )
        print(
            f"  {name:>9} report warm {ms(seconds)} at {rows[name]}x{d_in}x{d_out} | / report's "
            f"matmul bound ({matmuls} matmuls, {ms(bound)}) {ratio:5.2f} target <= "
            f"{BLOCK_OVER_BOUND_MAX:g} {verdict} | / per-tensor float8 report (per row) "
            f"{seconds / rows[name] / (timings['float8'] / rows['float8']):5.2f}{extra}"
        )


def report_matmuls(name: str) -> int:
    """The matmuls a recipe's report cannot do without: the two steps' MATMULS_PER_REPORT,
    and for a block recipe the per-tensor float8 product its comparison needs on the same
    batch (the comparison's recipe and float32 products are the steps' own first ones)."""
    return MATMULS_PER_REPORT + (name in BLOCK_RECIPES)


if __name__ == "__main__":
    main()
