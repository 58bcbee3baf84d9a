"""One training step's trace (``core.step.step.step_trace``), compiled as the page runs it.

Run op by op, every operation of a step is dispatched and compiled as a program of its own: a
block recipe's step took 11 s, compiled once 1.3 s. Compiled without backend optimizations, each
operation still rounds its own result as it does op by op (an optimized build contracts the
update's multiply and the masters' add into one fused multiply-add, one rounding fewer), so the
tests' exact float32 checks see the same numbers.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.core.step.loss_scale import StaticLossScale
from playground.core.step.policy import Policy
from playground.core.step.step import step_trace

UNOPTIMIZED = {"xla_backend_optimization_level": 0}


class Traced(NamedTuple):
    """Part of a StepTrace: the losses as JAX arrays (float32, shape (1,)) and the parameter
    fields as numpy {path name: array}, each in the order the step wrote its names."""

    initial_loss: jax.Array
    new_loss: jax.Array
    scaled_grads: dict[str, np.ndarray]
    grads: dict[str, np.ndarray]
    updates: dict[str, np.ndarray]
    params_before: dict[str, np.ndarray]
    params_after: dict[str, np.ndarray]


PARAM_FIELDS = Traced._fields[2:]


def traced_step(
    model: nnx.Module,
    tx: optax.GradientTransformation,
    x,
    y,
    loss_scale: float,
    policy: Policy,
    compiled: bool = True,
) -> Traced:
    """``step_trace(model, tx, x, y, StaticLossScale(loss_scale), policy)``, compiled (or op by op
    when ``compiled`` is False); ``model`` is left as it was. A compiled program's output dicts
    come back sorted by key, so the names are read while tracing and their order restored."""
    graphdef, state = nnx.split(model)
    names: dict[str, list[str]] = {}

    def run(state, x, y):
        scaling = StaticLossScale(jnp.float32(loss_scale))
        trace = step_trace(nnx.merge(graphdef, state, copy=True), tx, x, y, scaling, policy)
        names.update({field: list(getattr(trace, field)) for field in PARAM_FIELDS})
        fields = [tuple(getattr(trace, field).values()) for field in PARAM_FIELDS]
        return trace.initial_loss, trace.new_loss, fields

    if compiled:
        run = jax.jit(run, compiler_options=UNOPTIMIZED)
    initial_loss, new_loss, fields = run(state, jnp.asarray(x), jnp.asarray(y))
    params = [
        dict(zip(names[field], map(np.asarray, values), strict=True))
        for field, values in zip(PARAM_FIELDS, fields, strict=True)
    ]
    return Traced(initial_loss, new_loss, *params)
