"""The precision policy of a step, and the registry of compute recipes it names.

A ``Recipe`` is one value of the ``compute_dtype`` setting: how the matmuls of a step compute.
``RECIPES`` holds them (bfloat16, float16, float8); adding a recipe is one entry here plus its
float64 reference in the contract test (``tests/core/test_registries.py``). No other module tests
a compute dtype's name: it asks its recipe (``recipe(name)``) or the step's ``Policy``.

Example::

    >>> COMPUTE_DTYPES
    ('bfloat16', 'float16', 'float8')
    >>> recipe("float8").forward_format, recipe("float8").gradient_format
    ('float8_e4m3fn', 'float8_e5m2')
    >>> recipe("float16").plain_dtype, recipe("float8").plain_dtype
    ('float16', None)
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import jax
import jax.numpy as jnp
from flax import nnx

from playground.core.dtypes import DTYPES
from playground.core.float8 import (
    FORWARD_FORMAT,
    GRADIENT_FORMAT,
    SCALINGS,
    float8_dot_general,
    matmul_layers,
)
from playground.core.float8_report import float8_summary

# The dtype of the master parameters, and of the loss the step scales and returns.
FLOAT32 = "float32"


@dataclass(frozen=True)
class Recipe:
    """How the matmuls of a step compute: one entry of RECIPES.

    name: the ``compute_dtype`` setting's value.
    forward_format, gradient_format: names in ``core.dtypes.DTYPES``: the format of every
      matmul's operands on the way forward (input, weights), and of the gradient arriving at its
      output on the way back.
    cast_dtype: what the temporary model's parameters and the data are cast to; its activations
      and its loss are computed in it (a scaled recipe keeps float32 and quantizes in its matmul).
    dot_general: the matmul of every ``nnx.Linear`` of the temporary model, called with the
      keywords ``meta`` (that matmul's statistics, see ``core.float8``) and ``scaling``; None
      keeps nnx.Linear's own (``lax.dot_general`` on the cast operands).
    scalings: the per-tensor scalings it takes (the ``fp8_scaling`` setting); () for none.
    saturates: whether its casts clip a finite value beyond the format's largest to it (where a
      plain ``astype`` gives inf, or NaN in a format without an infinity).
    summary: its hook: StepReport -> what the summary shows under the recipe's name (JSON-able
      but for non-finite floats, as measured), or None.
    work_factor: the cost model's work per multiply-add of a pass, against a plain cast's 1.
    """

    name: str
    forward_format: str
    gradient_format: str
    cast_dtype: str
    dot_general: Callable[..., jax.Array] | None = None
    scalings: tuple[str, ...] = ()
    saturates: bool = False
    summary: Callable[[Any], Any] | None = None
    work_factor: float = 1.0

    def __post_init__(self) -> None:
        for fmt in (self.forward_format, self.gradient_format, self.cast_dtype):
            if fmt not in DTYPES:
                raise ValueError(f"a recipe's formats must be in DTYPES; got {fmt!r}")

    @property
    def plain_dtype(self) -> str | None:
        """The dtype of the exercise's plain cast of parameters and data (the recipe's only
        rounding), or None for a scaled recipe, whose matmuls quantize on their own."""
        return self.cast_dtype if self.dot_general is None else None

    @property
    def quantizes(self) -> bool:
        """Whether its matmuls quantize their operands (with per-tensor scales and statistics)."""
        return self.dot_general is not None


def _plain(name: str) -> Recipe:
    """The exercise's recipe for ``name``: parameters and data cast to it, nothing else."""
    return Recipe(name, forward_format=name, gradient_format=name, cast_dtype=name)


RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        _plain("bfloat16"),
        _plain("float16"),
        # The FP8 formats paper's hybrid (NVIDIA TransformerEngine's default): E4M3 forward for
        # precision, E5M2 backward for range; per-tensor scales; saturating casts.
        Recipe(
            "float8",
            forward_format=FORWARD_FORMAT,
            gradient_format=GRADIENT_FORMAT,
            cast_dtype=FLOAT32,
            dot_general=float8_dot_general,
            scalings=SCALINGS,
            saturates=True,
            summary=float8_summary,
            # Per-tensor scaling adds an amax, a multiply, a clip and a cast of every tensor
            # (measured: +5-25% over bfloat16).
            work_factor=1.25,
        ),
    )
}
# What a step can compute in: the compute_dtype setting's choices, the exercise's first.
COMPUTE_DTYPES = tuple(RECIPES)
# The float32 twin: every cast an identity (not a choice of the setting).
FULL_PRECISION = _plain(FLOAT32)


def recipe(name: str) -> Recipe:
    """The recipe registered as ``name``; ValueError naming the field and its choices."""
    if name not in RECIPES:
        raise ValueError(f"compute_dtype must be one of {', '.join(RECIPES)}; got {name!r}")
    return RECIPES[name]


def saturating_formats() -> frozenset[str]:
    """The formats some recipe casts to with saturation (the inspector's saturated column)."""
    chosen = [r for r in RECIPES.values() if r.saturates]
    return frozenset(fmt for r in chosen for fmt in (r.forward_format, r.gradient_format))


class Settings(Protocol):
    """The two settings a policy is read from (a ``core.settings.StepConfig`` has them)."""

    compute_dtype: str
    fp8_scaling: str


@dataclass(frozen=True)
class Policy:
    """How one step computes (the shape of DeepMind jmp's Policy): frozen and hashable, so a
    compiled program takes it as a static argument.

    Rule, for a step of ``model`` on (x, y)::

        params    : param_dtype (float32 masters, which a rounded copy never overwrites;
                    without_masters(): stored in compute.forward_format instead)
        forward   : temporary = cast_to_compute(model)  # params -> compute.cast_dtype, and
                                                        # compute.dot_general in every matmul
                    every matmul's operands in compute.forward_format
        backward  : the gradient arriving at each matmul in compute.gradient_format
        matmuls   : forward and backward at matmul_precision: "highest" wherever the operands
                    are float32 (the float32 twin, float8's dequantized operands), so that no
                    backend runs a float32 matmul in TF32 or bfloat16 passes (a GPU's default)
        loss      : mean((temporary(cast_to_compute(x)) - cast_to_compute(y)) ** 2), computed in
                    loss_dtype (= compute.cast_dtype), then cast_to_output: output_dtype, float32,
                    the dtype the step scales and returns it in

    ``fp8_scaling`` is kept only for a recipe that takes scalings (None otherwise), so changing
    the setting never recompiles a bfloat16 or float16 program.

    Usage::

        >>> exercise = Policy.of("bfloat16")
        >>> exercise == Policy.of("bfloat16", fp8_scaling="delayed")
        True
        >>> Policy.of("float8", "current").compute.gradient_format
        'float8_e5m2'
        >>> loss = exercise.cast_to_output(exercise.loss(model, x, y))  # float32
    """

    compute: Recipe
    fp8_scaling: str | None = None
    param_dtype: str = FLOAT32
    output_dtype: str = FLOAT32

    def __post_init__(self) -> None:
        scalings = self.compute.scalings
        if scalings and self.fp8_scaling not in scalings:
            raise ValueError(
                f"fp8_scaling must be one of {', '.join(scalings)}; got {self.fp8_scaling!r}"
            )
        if not scalings and self.fp8_scaling is not None:
            raise ValueError(f"the {self.compute.name} recipe takes no fp8_scaling")

    @classmethod
    def of(cls, compute_dtype: str, fp8_scaling: str | None = "current") -> Policy:
        """The policy of the ``compute_dtype`` setting; ``fp8_scaling`` only where it applies."""
        chosen = recipe(compute_dtype)
        return cls(chosen, fp8_scaling if chosen.scalings else None)

    def without_masters(self) -> Policy:
        """This policy with the parameters stored in the forward format (float8: E4M3) instead
        of float32 masters: the training dynamics' pure run."""
        return dataclasses.replace(self, param_dtype=self.compute.forward_format)

    @property
    def matmul_precision(self) -> str | None:
        """JAX's matmul precision for this policy's matmuls (see the rule); None: the default,
        which for bfloat16 or float16 operands is their own precision anyway."""
        return "highest" if self.compute.cast_dtype == FLOAT32 else None

    @property
    def loss_dtype(self) -> str:
        """The dtype the temporary model's activations and loss are computed in."""
        return self.compute.cast_dtype

    def cast_to_param(self, values: jax.Array) -> jax.Array:
        return values.astype(self.param_dtype)

    def cast_to_compute(self, values: jax.Array) -> jax.Array:
        return values.astype(self.compute.cast_dtype)

    def cast_to_output(self, loss: jax.Array) -> jax.Array:
        return loss.astype(self.output_dtype)

    def temporary_model(self, model: nnx.Module, metas: jax.Array | tuple = ()) -> nnx.Module:
        """A new module from ``model``'s Params cast to the compute dtype (``model`` keeps its
        arrays; gradients flow back through the casts to them), whose matmuls run the recipe's
        dot_general, each with its row of ``metas`` (layers, roles, STATS)."""
        # Only Param state moves into `params`; the graph definition stays with `graphdef`.
        graphdef, params = nnx.split(model, nnx.Param)
        temporary = nnx.merge(graphdef, jax.tree.map(self.cast_to_compute, params))
        if self.compute.dot_general is not None:
            for index, (_, layer) in enumerate(matmul_layers(temporary)):
                layer.dot_general = functools.partial(
                    self.compute.dot_general, meta=metas[index], scaling=self.fp8_scaling
                )
        return temporary

    def loss(
        self,
        model: nnx.Module,
        x: jax.Array,
        y: jax.Array,
        probes: tuple = (),
        metas: jax.Array | tuple = (),
    ) -> jax.Array:
        """The MSE of the temporary model on the cast data, in ``loss_dtype`` (see the rule).

        Casting y affects only the subtraction and the mean: the matmul's dtype is set by x and
        the parameters. ``probes`` (zeros in loss_dtype) are added to the hidden activations of
        a model that has them.
        """
        temporary = self.temporary_model(model, metas)
        inputs = self.cast_to_compute(x)
        # Set on each traced matmul; the backward pass's transposed matmuls inherit it. None
        # leaves the caller's own setting alone.
        precision = self.matmul_precision
        with jax.default_matmul_precision(precision) if precision else contextlib.nullcontext():
            prediction = temporary(inputs, probes) if probes else temporary(inputs)
        return jnp.mean((prediction - self.cast_to_compute(y)) ** 2)


def policy_for(config: Settings) -> Policy:
    """The policy of a config's ``compute_dtype`` and ``fp8_scaling`` settings."""
    return Policy.of(config.compute_dtype, config.fp8_scaling)


# The seed exercise's policy (bfloat16 compute) and its float32 twin's.
EXERCISE = Policy.of("bfloat16")
FLOAT32_TWIN = Policy(FULL_PRECISION)


def recipe_summaries(report: Any) -> dict[str, Any]:
    """Every recipe's summary hook run on ``report`` (a StepReport), by recipe name: another
    recipe's hook finds nothing of its own there and gives its empty value, so the keys stay the
    same whatever the compute dtype."""
    return {r.name: r.summary(report) for r in RECIPES.values() if r.summary is not None}
