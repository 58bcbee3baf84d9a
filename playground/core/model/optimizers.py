"""The optimizer registry: which optax transformation updates the float32 parameters.

Rule: an optimizer is one entry of ``OPTIMIZERS``: how to build it (``lr ->
GradientTransformation``, with optax's own defaults), how many parameter-shaped arrays of
state it keeps (what the cost model prices), its line in the ``optimizer`` setting's help, and
the export frameworks whose script template builds it (``scripts``; the export refuses it by
name for any other). ``'sgd'`` is the exercise's ``optax.sgd(lr)``,
``'momentum'`` is ``optax.sgd(lr, momentum=0.9)``, ``'adam'`` is ``optax.adam(lr)`` (no weight
decay: torch.optim.Adam), ``'adamw'`` is ``optax.adamw(lr, weight_decay=WEIGHT_DECAY)``, Adam
with decoupled weight decay on every parameter (torch.optim.AdamW's default decay, and its
betas and eps are optax's)::

    p = p - lr * (adam_update(g) + WEIGHT_DECAY * p)

The step
records the updates the transformation really produced, so update sizes and lost updates never
assume "update = lr x gradient".

The optimizer's state is stored in ``moments_dtype`` between steps (``stored_state``)::

    init(params)             state = round(tx.init(params))
    update(g, state, p)      updates, state = tx.update(g, state, p); state = round(state)

where round casts every floating leaf of the state (momentum's trace, Adam's two moments; never
the step count) to ``moments_dtype``, to nearest even. This step's update is computed from the
new state before it is stored, the next step's from the stored one as optax's arithmetic
reads it (a Python float times a bfloat16 moment, b1 x mu, is a bfloat16 product): optax's own
``mu_dtype`` rule for Adam's first moment, applied to every moment. A float32 twin keeps its
state in float32 (``float32_state``). SGD keeps no state, so it is unchanged;
``float32`` is no wrapper at all (today's optimizer, bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import optax

# AdamW's decoupled weight decay: torch.optim.AdamW's default (optax.adamw's is 1e-4).
WEIGHT_DECAY = 0.01


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
    "adamw": OptimizerSpec(
        lambda lr: optax.adamw(lr, weight_decay=WEIGHT_DECAY),
        2,
        f"optax.adamw, weight decay {WEIGHT_DECAY:g}",
        ("jax", "pytorch"),
    ),
}
DEFAULT_OPTIMIZER = "sgd"
# The dtypes the optimizer's state may be stored in (the ``moments_dtype`` setting).
MOMENTS_DTYPES = ("float32", "bfloat16")


@dataclass(frozen=True)
class OptimizerChoice:
    """An optimizer and the dtype its state is stored in; hashable, so compiled programs take
    it as static (a plain name is the same as ``OptimizerChoice(name)``)."""

    name: str = DEFAULT_OPTIMIZER
    moments_dtype: str = MOMENTS_DTYPES[0]


def float32_state(choice: str | OptimizerChoice) -> OptimizerChoice:
    """The same optimizer with its state in float32: the float32 twin's, whatever the setting."""
    return OptimizerChoice(choice if isinstance(choice, str) else choice.name)


def stored_state(
    tx: optax.GradientTransformation, moments_dtype: str
) -> optax.GradientTransformation:
    """``tx`` with its state stored in ``moments_dtype`` between steps (the module rule)."""

    def stored(state):
        def cast(leaf):
            floating = jnp.issubdtype(jnp.result_type(leaf), jnp.floating)
            return leaf.astype(moments_dtype) if floating else leaf

        return jax.tree.map(cast, state)

    def update(updates, state, params=None):
        updates, state = tx.update(updates, state, params)
        return updates, stored(state)

    return optax.GradientTransformation(lambda params: stored(tx.init(params)), update)


def build_optimizer(choice: str | OptimizerChoice, lr) -> optax.GradientTransformation:
    """The optax transformation of ``choice`` (a name, or a name with its state's dtype) at
    learning rate ``lr`` (a number or a traced scalar)."""
    if isinstance(choice, str):
        choice = OptimizerChoice(choice)
    if choice.name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}; got {choice.name!r}")
    if choice.moments_dtype not in MOMENTS_DTYPES:
        raise ValueError(
            f"moments_dtype must be one of {', '.join(MOMENTS_DTYPES)}; "
            f"got {choice.moments_dtype!r}"
        )
    tx = OPTIMIZERS[choice.name].build(lr)
    if choice.moments_dtype == MOMENTS_DTYPES[0]:
        return tx
    return stored_state(tx, choice.moments_dtype)
