"""Mixed-precision step playground: one Flax NNX SGD step in bfloat16 or float16, next to float32.

The public API::

    mixed_precision_step(seed, x, y, lr, loss_scale)  # the seed exercise, returns (1,) float32
    float32_step(seed, x, y, lr)                       # the same step with no casts
    StepConfig(...)                                    # validated settings, one table of limits
    make_batch(config) -> (x, y)                       # the synthetic data
    run_report(config) -> StepReport                   # both steps compiled and compared
    summarize(report) -> dict                          # the JSON summary shown on the page
"""

from playground.config import ConfigError, StepConfig
from playground.data import make_batch
from playground.report import ParamReport, StepReport, run_report
from playground.step import float32_step, mixed_precision_step
from playground.summary import summarize

__all__ = [
    "ConfigError",
    "ParamReport",
    "StepConfig",
    "StepReport",
    "float32_step",
    "make_batch",
    "mixed_precision_step",
    "run_report",
    "summarize",
]
