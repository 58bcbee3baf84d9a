"""The optimizer registry: which optax transformation updates the float32 parameters.

Rule: an optimizer is one entry of ``OPTIMIZERS``, a function ``lr -> GradientTransformation``
with optax's own defaults: ``'sgd'`` is the exercise's ``optax.sgd(lr)``, ``'momentum'`` is
``optax.sgd(lr, momentum=0.9)``, ``'adam'`` is ``optax.adam(lr)``. The step records the
updates the transformation really produced, so update sizes and lost updates never assume
"update = lr x gradient".
"""

from __future__ import annotations

from collections.abc import Callable

import optax

OPTIMIZERS: dict[str, Callable[..., optax.GradientTransformation]] = {
    "sgd": lambda lr: optax.sgd(lr),
    "momentum": lambda lr: optax.sgd(lr, momentum=0.9),
    "adam": lambda lr: optax.adam(lr),
}
DEFAULT_OPTIMIZER = "sgd"


def build_optimizer(name: str, lr) -> optax.GradientTransformation:
    """The optax transformation ``name`` at learning rate ``lr`` (a number or a traced scalar)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {name!r}")
    return OPTIMIZERS[name](lr)
