"""The optimizer registry: which optax transformation updates the float32 parameters.

Rule: an optimizer is one entry of ``OPTIMIZERS``: how to build it (``lr ->
GradientTransformation``, with optax's own defaults) and how many parameter-shaped arrays of
state it keeps (what the cost model prices). ``'sgd'`` is the exercise's ``optax.sgd(lr)``,
``'momentum'`` is ``optax.sgd(lr, momentum=0.9)``, ``'adam'`` is ``optax.adam(lr)``. The step
records the updates the transformation really produced, so update sizes and lost updates never
assume "update = lr x gradient".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import optax


@dataclass(frozen=True)
class OptimizerSpec:
    """One optimizer: ``build(lr)``, and ``state_arrays``, the parameter-shaped arrays of state
    it keeps (momentum's trace; adam's two moments)."""

    build: Callable[..., optax.GradientTransformation]
    state_arrays: int


OPTIMIZERS: dict[str, OptimizerSpec] = {
    "sgd": OptimizerSpec(lambda lr: optax.sgd(lr), state_arrays=0),
    "momentum": OptimizerSpec(lambda lr: optax.sgd(lr, momentum=0.9), state_arrays=1),
    "adam": OptimizerSpec(lambda lr: optax.adam(lr), state_arrays=2),
}
DEFAULT_OPTIMIZER = "sgd"


def build_optimizer(name: str, lr) -> optax.GradientTransformation:
    """The optax transformation ``name`` at learning rate ``lr`` (a number or a traced scalar)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {name!r}")
    return OPTIMIZERS[name].build(lr)
