"""The optimizer registry: which optax transformation updates the float32 parameters.

Rule: an optimizer is one entry of ``OPTIMIZERS``: how to build it (``lr ->
GradientTransformation``, with optax's own defaults), how many parameter-shaped arrays of
state it keeps (what the cost model prices), its line in the ``optimizer`` setting's help, and
the export frameworks whose script template builds it (``scripts``; the export refuses it by
name for any other). ``'sgd'`` is the exercise's ``optax.sgd(lr)``,
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
    """One optimizer: ``build(lr)``, ``state_arrays``, the parameter-shaped arrays of state it
    keeps (momentum's trace; adam's two moments), ``about`` (its help line) and ``scripts``
    (the export frameworks that build it)."""

    build: Callable[..., optax.GradientTransformation]
    state_arrays: int
    about: str = ""
    scripts: tuple[str, ...] = ()


OPTIMIZERS: dict[str, OptimizerSpec] = {
    "sgd": OptimizerSpec(
        lambda lr: optax.sgd(lr), 0, "optax.sgd (the exercise)", ("jax", "pytorch")
    ),
    "momentum": OptimizerSpec(
        lambda lr: optax.sgd(lr, momentum=0.9),
        1,
        "optax.sgd with momentum 0.9",
        ("jax", "pytorch"),
    ),
    "adam": OptimizerSpec(lambda lr: optax.adam(lr), 2, "optax.adam", ("jax", "pytorch")),
}
DEFAULT_OPTIMIZER = "sgd"


def build_optimizer(name: str, lr) -> optax.GradientTransformation:
    """The optax transformation ``name`` at learning rate ``lr`` (a number or a traced scalar)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {name!r}")
    return OPTIMIZERS[name].build(lr)
