"""The first call's price written out by hand from ``core.settings.compile_cost``'s measured
constants.

Its seconds per endpoint and dense layer, the recipe's factor and each endpoint's rate are
data (measured by bench/bench_compile.py); the arithmetic that turns them into a price, and
the training run's cap, are restated here, so tests check the modules' arithmetic against this.
"""

from __future__ import annotations

from playground.core.recipes.registry import recipe
from playground.core.settings import compile_cost as cc


def seconds_by_hand(endpoint: str, dtype: str, dense: int, norm=False, softmax=False) -> float:
    """base + the recipe's extra + dense layers x per layer x the recipe's factor (x the
    norm's) + the softmax's."""
    base, per_layer = cc.COMPILE[endpoint]
    factor, extra = recipe(dtype).compile_cost[("step", "dynamics", "sweep").index(endpoint)]
    per_layer *= factor * (cc.NORM_LAYER_FACTOR if norm else 1)
    return base + extra + dense * per_layer + (cc.CLASSIFICATION_SECONDS if softmax else 0)


def compile_work_by_hand(endpoint: str, config) -> float:
    """A StepConfig's compile for ``endpoint`` in that endpoint's multiply-adds."""
    dense = config.hidden_layers + 1 if config.model == "mlp" else 1
    seconds = seconds_by_hand(
        endpoint,
        config.compute_dtype,
        dense,
        norm=config.norm != "none",
        softmax=config.task != "regression",
    )
    return seconds * cc.BUDGETS[endpoint] / cc.BUDGET_SECONDS[endpoint]


def run_steps_by_hand(step: float) -> int:
    """The most training steps of ``step`` work each: within 2^35 (the run's warm cap; its
    compile is a one-off and caps nothing), at most 1000."""
    return int(min(1000, 2**35 // step))
