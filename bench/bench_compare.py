"""/compare's warm time against one /step per recipe, measured in the same run.

Run ``python bench/bench_compare.py``. For each shape it calls the endpoints' own handlers in
this process (``ui.tabs.compare.run_compare`` and ``ui.endpoints.run_step``, views and charts
included, as the app runs them), each program compiled first, and prints the median of REPEATS:
one /compare, the six /step calls of the same settings (one per registered recipe, together),
and their ratio. Target: /compare within 1.5 x the six /step calls, warm. Misses are printed,
never raised.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground.core.recipes.registry import RECIPES
from playground.core.settings.settings import StepConfig
from playground.ui.arguments import STEP
from playground.ui.endpoints import run_step
from playground.ui.tabs.compare import COMPARE, run_compare

TARGET = 1.5
REPEATS = 5
SHAPES = {
    "linear 256 x 64 -> 16 (the page's defaults)": {},
    "linear 1024 x 256 -> 128": {"n": 1024, "d_in": 256, "d_out": 128},
    "mlp 512 x 64 -> 16, 2 hidden layers of 64": {"n": 512, "model": "mlp"},
}


def inputs(config: StepConfig, order: tuple[str, ...]) -> list:
    values = config.to_dict() | {"data": None, "param_count": 0, "tokens_per_batch": 0}
    return [values[name] for name in order]


def median_seconds(call) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    print(f"/compare against one /step per recipe ({len(RECIPES)}), warm, median of {REPEATS}")
    for label, settings in SHAPES.items():
        config = StepConfig(**settings)
        steps = [inputs(config.replace(compute_dtype=name), STEP.order) for name in RECIPES]

        def six_steps(steps=steps) -> None:
            for values in steps:
                run_step(*values)

        def compare(config=config) -> None:
            run_compare(*inputs(config, COMPARE.order))

        six_steps()  # compiles every recipe's step program; /compare runs the same ones
        compare()
        stepped, compared = median_seconds(six_steps), median_seconds(compare)
        ratio = compared / stepped
        verdict = "PASS" if ratio <= TARGET else "MISS"
        print(
            f"{label}: /compare {compared * 1000:.0f} ms, six /step {stepped * 1000:.0f} ms, "
            f"ratio {ratio:.2f} (target <= {TARGET}) {verdict}"
        )


if __name__ == "__main__":
    main()
