"""Every figure the app draws (step, lab, sweep, dynamics), for a few settings that matter.

The settings cover each compute dtype, float16's underflow (tiny data, S = 1) and its overflow
(S = 2^16: non-finite gradients and a NaN loss); the sweep and the training run use float16,
whose sweep has both a safe window and overflowing scales and whose dynamic run skips steps.
Each new (shape, dtype) compiles once, so they all share one small shape.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from playground import StepConfig, run_report
from playground.core.recipes.registry import COMPUTE_DTYPES
from playground.core.runs.sweep import run_sweep
from playground.core.runs.train import run_dynamics
from playground.core.step.report import LOG2_HIGH, LOG2_LOW, ActivationReport
from playground.sections.dynamics.charts import DYNAMICS_FIGURES
from playground.sections.lab.charts import activation_histogram, magnitude_histogram, sweep_figure
from playground.sections.step.charts import FIGURES

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
TINY_FLOAT16 = {"compute_dtype": "float16", "input_scale": 2.0**-12, "target_scale": 2.0**-12}
SETTINGS = {
    **{dtype: StepConfig(**SMALL, compute_dtype=dtype) for dtype in COMPUTE_DTYPES},
    "float16 underflow": StepConfig(**SMALL, **TINY_FLOAT16, loss_scale=1.0),
    "float16 overflow": StepConfig(**SMALL, compute_dtype="float16", loss_scale=2.0**16),
}
SWEEPS = ("float16 underflow",)
DYNAMICS = {"float16 dynamic": (SETTINGS["float16 overflow"], 12, "dynamic", 3)}


def with_hidden_layer(report):
    """``report`` with one made-up hidden activation gradient (2 zeros, 8 entries near 2^-5):
    the activation chart with data, without compiling an MLP."""
    counts = np.zeros(LOG2_HIGH - LOG2_LOW, np.int64)
    counts[-5 - LOG2_LOW] = 8
    layer = ActivationReport(layer=0, zero_count=2, nonfinite_count=0, size=10, log2_counts=counts)
    return dataclasses.replace(report, activations=(layer,))


HIDDEN_LAYER_FIGURE = "bfloat16 with a hidden layer: activation_histogram"


def _step_draws() -> tuple:
    return (*FIGURES, magnitude_histogram, activation_histogram)


def figure_names() -> list[str]:
    """The names ``all_figures`` gives its figures, in its order, found without computing any:
    test modules parametrize over them at collection, when computing the figures would cost
    every worker the compiles (seconds) whether or not it runs those tests."""
    names = [f"{name}: {draw.__name__}" for name in SETTINGS for draw in _step_draws()]
    names.append(HIDDEN_LAYER_FIGURE)
    names += [f"{name}: sweep_figure" for name in SWEEPS]
    names += [f"{name}: {draw.__name__}" for name in DYNAMICS for draw in DYNAMICS_FIGURES]
    return names


@functools.cache
def step_figures() -> dict[str, dict]:
    """'<settings>: <figure>' -> figure dict, for every chart of the step event."""
    figures = {}
    for name, config in SETTINGS.items():
        report = run_report(config)
        for draw in _step_draws():
            figures[f"{name}: {draw.__name__}"] = draw(report)
    hidden = with_hidden_layer(run_report(SETTINGS["bfloat16"]))
    figures[HIDDEN_LAYER_FIGURE] = activation_histogram(hidden)
    return figures


@functools.cache
def all_figures() -> dict[str, dict]:
    """Every figure: the step event's, the sweep's and the training run's."""
    figures = dict(step_figures())
    for name in SWEEPS:
        figures[f"{name}: sweep_figure"] = sweep_figure(run_sweep(SETTINGS[name]))
    for name, (config, steps, mode, period) in DYNAMICS.items():
        dynamics = run_dynamics(config, steps, mode, period)
        for draw in DYNAMICS_FIGURES:
            figures[f"{name}: {draw.__name__}"] = draw(dynamics)
    return figures
