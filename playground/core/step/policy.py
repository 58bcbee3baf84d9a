"""The precision policy of a step: its compute recipe, its per-operation policy and its casts.

Rule: a ``Policy`` is what one step needs to know about precision, built from the settings by
``policy_for``: the recipe that ``compute_dtype`` names (``core.recipes.registry``), the
per-operation policy (``core.model.op_policy``), where the parameters live and how the loss
is checked op by op. No module tests a compute dtype's name: it asks its recipe or this policy.

Example::

    >>> EXERCISE.compute.name, FLOAT32_TWIN.compute.name
    ('bfloat16', 'float32')
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass
from typing import Protocol

import jax
from flax import nnx

from playground.core.formats.accumulation import (
    FLOAT32_ACCUMULATION,
    Accumulation,
    accumulating_dot_general,
)
from playground.core.model.forward_pass import watched_pass
from playground.core.model.losses import TASKS
from playground.core.model.models import param_kind
from playground.core.model.op_policy import EXERCISE_OPS, OpPolicy, Watched, preset
from playground.core.recipes.float8 import (
    matmul_layers,
)
from playground.core.recipes.registry import FLOAT32, FULL_PRECISION, Recipe, recipe


class Settings(Protocol):
    """The settings a policy is read from (a ``core.settings.settings.StepConfig`` has them)."""

    compute_dtype: str
    fp8_scaling: str
    precision_policy: str
    task: str
    nvfp4_hadamard: str
    accumulation: str
    promotion_interval: int


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
        matmuls   : at matmul_precision: "highest" wherever the operands are float32 (no
                    backend may run them in TF32 or bfloat16 passes, a GPU's default);
                    under an emulated ``accumulation`` (``core.formats.accumulation``) every
                    matmul, forward and backward, accumulates its products by that rule
        ops       : each operation in its kind's dtype (``ops``: ``core.model.op_policy``'s
                    preset; the exercise's: all in compute.cast_dtype); a layer norm's scale
                    and bias cast to the normalisation dtype
        loss      : ``core.model.losses.TASK_LOSSES[task]`` (the exercise's MSE
                    mean((temporary(cast_to_compute(x)) - cast_to_compute(y)) ** 2)) in
                    loss_dtype, then cast_to_output: output_dtype, float32, the dtype the step
                    scales and returns it in

    ``fp8_scaling`` is kept only for a recipe that takes scalings (None otherwise), so changing
    the setting never recompiles a bfloat16 or float16 program; ``hadamard`` (the
    ``nvfp4_hadamard`` setting) likewise only for a recipe whose matmul has a Hadamard block;
    ``accumulation`` is float32's (XLA's own matmuls, no emulation) unless it is emulated.

    Usage::

        >>> Policy.of("bfloat16") == Policy.of("bfloat16", fp8_scaling="delayed")
        True
        >>> Policy.of("bfloat16", precision_policy="autocast").loss_dtype
        'float32'
    """

    compute: Recipe
    fp8_scaling: str | None = None
    param_dtype: str = FLOAT32
    output_dtype: str = FLOAT32
    ops: OpPolicy = EXERCISE_OPS
    task: str = "regression"
    hadamard: bool = False
    accumulation: Accumulation = FLOAT32_ACCUMULATION

    def __post_init__(self) -> None:
        if self.hadamard and not self.compute.hadamard_setting:
            raise ValueError(f"the {self.compute.name} recipe takes no nvfp4_hadamard")
        scalings = self.compute.scalings
        if scalings and self.fp8_scaling not in scalings:
            raise ValueError(
                f"fp8_scaling must be one of {', '.join(scalings)}; got {self.fp8_scaling!r}"
            )
        if not scalings and self.fp8_scaling is not None:
            raise ValueError(f"the {self.compute.name} recipe takes no fp8_scaling")
        if self.task not in TASKS:
            raise ValueError(f"task must be one of {', '.join(TASKS)}; got {self.task!r}")

    @classmethod
    def of(
        cls,
        compute_dtype: str,
        fp8_scaling: str | None = "current",
        precision_policy: str = EXERCISE_OPS.name,
        task: str = TASKS[0],
        nvfp4_hadamard: str = "on",
        accumulation: Accumulation = FLOAT32_ACCUMULATION,
    ) -> Policy:
        """The policy of the ``compute_dtype`` setting; ``fp8_scaling`` and ``nvfp4_hadamard``
        only where they apply; the ``precision_policy`` preset, the ``task``'s loss and the
        matmuls' ``accumulation``."""
        chosen = recipe(compute_dtype)
        scaling = fp8_scaling if chosen.scalings else None
        hadamard = chosen.hadamard_setting and nvfp4_hadamard == "on"
        return cls(
            chosen,
            scaling,
            ops=preset(precision_policy),
            task=task,
            hadamard=hadamard,
            accumulation=accumulation.normalized(),
        )

    def op_dtype(self, kind: str) -> str:  # kind: one of core.model.op_policy.KINDS
        return self.ops.dtype(kind, self.compute.cast_dtype)

    def without_masters(self) -> Policy:
        """Parameters stored in the forward format, no masters (the dynamics' pure run)."""
        return dataclasses.replace(self, param_dtype=self.compute.forward_format)

    @property
    def matmul_precision(self) -> str | None:
        """JAX's matmul precision (see the rule); None: the default, which for bfloat16 or
        float16 operands is their own anyway."""
        return "highest" if self.compute.cast_dtype == FLOAT32 else None

    @property
    def loss_dtype(self) -> str:
        """The dtype the loss is computed in (the exercise: the compute dtype, as everything)."""
        return self.op_dtype("loss")

    def cast_to_param(self, values: jax.Array) -> jax.Array:
        return values.astype(self.param_dtype)

    def cast_to_compute(self, values: jax.Array) -> jax.Array:
        return values.astype(self.compute.cast_dtype)

    def cast_to_output(self, loss: jax.Array) -> jax.Array:
        return loss.astype(self.output_dtype)

    def temporary_model(self, model: nnx.Module, metas: jax.Array | tuple = ()) -> nnx.Module:
        """A new module from ``model``'s Params cast (see the rule; ``model`` keeps its arrays,
        gradients flow back through the casts), whose matmuls run the recipe's dot_general,
        each with its row of ``metas`` (layers, roles, STATS); a block recipe's also with
        ``hadamard`` and its layer's index as the key of its draws; an emulated accumulation
        goes to the recipe's dot_general, or is a plain recipe's own."""
        # Only Param state moves into `params`; the graph definition stays with `graphdef`.
        graphdef, params = nnx.split(model, nnx.Param)
        cast = jax.tree_util.tree_map_with_path(
            lambda path, value: value.astype(self.op_dtype(param_kind(path))), params
        )
        temporary = nnx.merge(graphdef, cast)
        emulated = {"accumulation": self.accumulation} if self.accumulation.emulated else {}
        if self.compute.dot_general is not None:
            for index, (_, layer) in enumerate(matmul_layers(temporary)):
                block = {"hadamard": self.hadamard, "key": index} if self.compute.block else {}
                layer.dot_general = functools.partial(
                    self.compute.dot_general,
                    meta=metas[index],
                    scaling=self.fp8_scaling,
                    **block,
                    **emulated,
                )
        elif emulated:
            for _, layer in matmul_layers(temporary):
                layer.dot_general = functools.partial(accumulating_dot_general, **emulated)
        return temporary

    def loss(
        self,
        model: nnx.Module,
        x: jax.Array,
        y: jax.Array,
        probes: tuple = (),
        metas: jax.Array | tuple = (),
    ) -> jax.Array:
        """The loss (see the rule); ``probes``: zeros added to a model's hidden activations."""
        return self.watched_loss(model, x, y, probes, metas).loss

    def watched_loss(
        self,
        model: nnx.Module,
        x: jax.Array,
        y: jax.Array,
        probes: tuple = (),
        metas: jax.Array | tuple = (),
        flags: jax.Array | None = None,
    ) -> Watched:
        """``loss`` with each operation checked for inf and NaN (``core.model.forward_pass``)."""
        temporary = self.temporary_model(model, metas)
        precision = self.matmul_precision  # the backward's transposed matmuls inherit it
        with jax.default_matmul_precision(precision) if precision else contextlib.nullcontext():
            return watched_pass(self, temporary, self.cast_to_compute(x), y, probes, flags)


def policy_for(config: Settings) -> Policy:
    """The policy of a config's ``compute_dtype``, ``fp8_scaling``, ``precision_policy``,
    ``task``, ``nvfp4_hadamard``, ``accumulation`` and ``promotion_interval`` settings."""
    settings = (config.compute_dtype, config.fp8_scaling, config.precision_policy, config.task)
    accumulation = Accumulation(config.accumulation, config.promotion_interval)
    return Policy.of(*settings, nvfp4_hadamard=config.nvfp4_hadamard, accumulation=accumulation)


# The seed exercise's policy (bfloat16 compute) and its float32 twin's.
EXERCISE = Policy.of("bfloat16")
FLOAT32_TWIN = Policy(FULL_PRECISION)
