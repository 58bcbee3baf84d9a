"""The accumulation emulation's cost against a plain matmul, forward and backward.

Run ``python bench/bench_accumulation.py`` from anywhere. At a medium shape and at the largest
one the settings table allows (N x D_in x D_out), on bfloat16 operands as the exercise's step
casts them, it prints the warm medians, timed in alternation in one run
(``bench_core.warm_medians``), of the compiled forward + backward (``jax.vjp``: out, d_x, d_w)
of

* the plain matmul (XLA's own ``dot``, float32 accumulation: the default step's);
* ``core.formats.accumulation.accumulated_matmul`` for each emulated accumulation, without
  promotion and promoted every 128 products,

and each one's ratio to the plain matmul: the work factor the cost model prices an emulated
accumulation at (``core.settings.cost.ACCUMULATION_WORK_FACTOR``; target: the largest measured
ratio <= that factor, PASS or MISS, never raised).
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_core import ms, shapes, warm_medians  # noqa: E402

from playground.core.formats.accumulation import (  # noqa: E402
    ACCUMULATIONS,
    Accumulation,
    accumulated_matmul,
)
from playground.core.settings.cost import ACCUMULATION_WORK_FACTOR  # noqa: E402


def forward_and_back(matmul):
    """A compiled (x, w, g) -> (out, d_x, d_w) of ``matmul(x, w)``."""

    def run(x, w, g):
        out, pullback = jax.vjp(matmul, x, w)
        return (out, *pullback(g))

    return jax.jit(run)


def main() -> None:
    rules = [
        Accumulation(name, interval)
        for name in ACCUMULATIONS
        if Accumulation(name).emulated
        for interval in (0, 128)
    ]
    worst = 0.0
    for name, (n, d_in, d_out) in shapes()[1:]:
        rng = np.random.default_rng(0)
        x, w, g = (
            jnp.asarray(rng.standard_normal(shape), jnp.float32).astype(jnp.bfloat16)
            for shape in ((n, d_in), (d_in, d_out), (n, d_out))
        )
        calls = [forward_and_back(jnp.dot)] + [
            forward_and_back(functools.partial(accumulated_matmul, accumulation=rule))
            for rule in rules
        ]
        timed = [(lambda i, call=call, args=(x, w, g): call(*args), None) for call in calls]
        medians = warm_medians(*timed)
        shape = f"{n}x{d_in}x{d_out}"
        print(f"{name:<8} {shape:<14} plain matmul forward+backward {ms(medians[0])}")
        for rule, median in zip(rules, medians[1:], strict=True):
            ratio = median / medians[0]
            worst = max(worst, ratio)
            print(
                f"{name:<8} {shape:<14} {rule.name:<9} promotion {rule.promotion_interval:<4} "
                f"{ms(median)}  ratio to plain {ratio:.2f}"
            )
    verdict = "PASS" if worst <= ACCUMULATION_WORK_FACTOR else "MISS"
    print(
        f"largest ratio {worst:.2f} against the cost model's factor "
        f"{ACCUMULATION_WORK_FACTOR}: {verdict}"
    )


if __name__ == "__main__":
    main()
