"""Mixed-precision step playground: one Flax NNX SGD step in bfloat16 or float16, next to float32.

The public API::

    mixed_precision_step(seed, x, y, lr, loss_scale)  # the seed exercise, returns (1,) float32
    float32_step(seed, x, y, lr)                       # the same step with no casts
    StepConfig(...)                                    # validated settings, one table of limits
    make_batch(config) -> (x, y)                       # the synthetic data
    run_report(config) -> StepReport                   # both steps compiled and compared
    summarize(report) -> dict                          # the JSON summary shown on the page
    run_sweep(config) / sweep_summary(sweep)           # the loss-scale sweep
    run_dynamics(config, steps, mode, period)          # many steps: float32, mixed, pure
    dynamics_summary(dynamics) -> dict

Example::

    >>> from playground import StepConfig, float32_step, make_batch, mixed_precision_step
    >>> x, y = make_batch(StepConfig(n=32, d_in=8, d_out=4))
    >>> mixed_precision_step(0, x, y, lr=0.1, loss_scale=1024.0)  # a bfloat16 loss
    Array([1.75], dtype=float32)
    >>> round(float(float32_step(0, x, y, lr=0.1)[0]), 3)
    1.752
"""

from playground.core.data.synthetic import make_batch
from playground.core.runs.sweep import SweepReport, run_sweep
from playground.core.runs.train import DynamicsReport, run_dynamics
from playground.core.settings.settings import ConfigError, StepConfig
from playground.core.step.report import ParamReport, StepReport, run_report
from playground.core.step.step import float32_step, mixed_precision_step
from playground.sections.dynamics.summary import dynamics_summary
from playground.sections.lab.summary import sweep_summary
from playground.sections.step.summary import summarize

__all__ = [
    "ConfigError",
    "DynamicsReport",
    "ParamReport",
    "StepConfig",
    "StepReport",
    "SweepReport",
    "dynamics_summary",
    "float32_step",
    "make_batch",
    "mixed_precision_step",
    "run_dynamics",
    "run_report",
    "run_sweep",
    "summarize",
    "sweep_summary",
]
