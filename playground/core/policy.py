"""The precision policy of a step, and the registry of compute recipes it names.

A ``Recipe`` (``core.recipe``) is one value of the ``compute_dtype`` setting: how the matmuls
of a step compute. ``RECIPES`` holds them (bfloat16, float16, float8, and the block-scaled
mxfp8, fp8_block, nvfp4); adding a recipe is one entry here plus its
float64 reference in the contract test (``tests/core/test_registries.py``). No other module tests
a compute dtype's name: it asks its recipe (``recipe(name)``) or the step's ``Policy``.

Example::

    >>> COMPUTE_DTYPES[:3], recipe("float8").gradient_format, recipe("float8").plain_dtype
    (('bfloat16', 'float16', 'float8'), 'float8_e5m2', None)
    >>> COMPUTE_DTYPES[3:], recipe("nvfp4").gradient_format
    (('mxfp8', 'fp8_block', 'nvfp4'), 'float4_e2m1fn')
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Protocol

import jax
from flax import nnx

from playground.core.block_formats import FP8_BLOCK, MXFP8, NVFP4
from playground.core.float8 import (
    FORWARD_FORMAT,
    GRADIENT_FORMAT,
    SCALINGS,
    float8_dot_general,
    matmul_layers,
)
from playground.core.float8_report import quantized_summary
from playground.core.forward_pass import watched_pass
from playground.core.losses import TASKS
from playground.core.models import param_kind
from playground.core.op_policy import EXERCISE_OPS, OpPolicy, Watched, preset
from playground.core.recipe import FLOAT32, Recipe, block_recipe, plain_recipe

# Compile against bfloat16's, per endpoint (step, dynamics, sweep): (factor on each dense
# layer's part, extra seconds), fitted to bench/bench_compile.py's first-call overheads on
# 2 vCPUs and rounded up (float16's /step compiled at about 0.55 of bfloat16's; its other
# endpoints were not measured, and fp8_block's runs and sweeps take mxfp8's).
FLOAT16_COMPILE = ((0.7, 0.0), (1.0, 0.0), (1.0, 0.0))
FLOAT8_COMPILE = ((1.6, 0.0), (2.1, 0.0), (2.0, 0.0))
MXFP8_COMPILE = ((1.2, 0.8), (3.8, 0.0), (1.2, 1.15))
FP8_BLOCK_COMPILE = ((1.75, 0.0), (3.8, 0.0), (1.2, 1.15))
NVFP4_COMPILE = ((2.2, 0.4), (4.35, 0.25), (2.0, 0.1))

RECIPES: dict[str, Recipe] = {
    recipe.name: recipe
    for recipe in (
        plain_recipe("bfloat16"),
        dataclasses.replace(plain_recipe("float16"), compile_cost=FLOAT16_COMPILE),
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
            summary=functools.partial(quantized_summary, recipe_name="float8"),
            # Per-tensor scaling adds an amax, a multiply, a clip and a cast of every tensor
            # (measured: +5-25% over bfloat16).
            work_factor=1.25,
            compile_cost=FLOAT8_COMPILE,
        ),
        # Block-scaled recipes (TransformerEngine 2.x's MXFP8BlockScaling, Float8BlockScaling,
        # NVFP4BlockScaling), emulated in float32 on CPU. Their work factors: a quantize-
        # dequantize of each operand per matmul, forward and backward (bench/bench_blocks.py
        # at 4096 x 1024 x 1024 on 2 vCPUs, against float32's forward and backward: mxfp8
        # 1.36, fp8_block 1.27, nvfp4 1.61, with its Hadamard transform, the default, 1.97).
        block_recipe(MXFP8, work_factor=1.4, compile_cost=MXFP8_COMPILE),
        block_recipe(FP8_BLOCK, work_factor=1.3, compile_cost=FP8_BLOCK_COMPILE),
        block_recipe(NVFP4, work_factor=2.0, compile_cost=NVFP4_COMPILE),
    )
}
# What a step can compute in: the compute_dtype setting's choices, the exercise's first.
COMPUTE_DTYPES = tuple(RECIPES)
# The float32 twin: every cast an identity (not a choice of the setting).
FULL_PRECISION = plain_recipe(FLOAT32)


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
    """The settings a policy is read from (a ``core.settings.StepConfig`` has them)."""

    compute_dtype: str
    fp8_scaling: str
    precision_policy: str
    task: str
    nvfp4_hadamard: str


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
                    backend may run them in TF32 or bfloat16 passes, a GPU's default)
        ops       : each operation in its kind's dtype (``ops``: ``core.op_policy``'s
                    preset; the exercise's: all in compute.cast_dtype); a layer norm's scale
                    and bias cast to the normalisation dtype
        loss      : ``core.losses.TASK_LOSSES[task]`` (the exercise's MSE
                    mean((temporary(cast_to_compute(x)) - cast_to_compute(y)) ** 2)) in
                    loss_dtype, then cast_to_output: output_dtype, float32, the dtype the step
                    scales and returns it in

    ``fp8_scaling`` is kept only for a recipe that takes scalings (None otherwise), so changing
    the setting never recompiles a bfloat16 or float16 program; ``hadamard`` (the
    ``nvfp4_hadamard`` setting) likewise only for a recipe whose matmul has a Hadamard block.

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
    ) -> Policy:
        """The policy of the ``compute_dtype`` setting; ``fp8_scaling`` and ``nvfp4_hadamard``
        only where they apply; the ``precision_policy`` preset and the ``task``'s loss."""
        chosen = recipe(compute_dtype)
        scaling = fp8_scaling if chosen.scalings else None
        hadamard = chosen.hadamard_setting and nvfp4_hadamard == "on"
        return cls(chosen, scaling, ops=preset(precision_policy), task=task, hadamard=hadamard)

    def op_dtype(self, kind: str) -> str:  # kind: one of core.op_policy.KINDS
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
        ``hadamard`` and its layer's index as the key of its draws."""
        # Only Param state moves into `params`; the graph definition stays with `graphdef`.
        graphdef, params = nnx.split(model, nnx.Param)
        cast = jax.tree_util.tree_map_with_path(
            lambda path, value: value.astype(self.op_dtype(param_kind(path))), params
        )
        temporary = nnx.merge(graphdef, cast)
        if self.compute.dot_general is not None:
            for index, (_, layer) in enumerate(matmul_layers(temporary)):
                block = {"hadamard": self.hadamard, "key": index} if self.compute.block else {}
                layer.dot_general = functools.partial(
                    self.compute.dot_general, meta=metas[index], scaling=self.fp8_scaling, **block
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
        """``loss`` with each operation checked for inf and NaN (``core.forward_pass``)."""
        temporary = self.temporary_model(model, metas)
        precision = self.matmul_precision  # the backward's transposed matmuls inherit it
        with jax.default_matmul_precision(precision) if precision else contextlib.nullcontext():
            return watched_pass(self, temporary, self.cast_to_compute(x), y, probes, flags)


def policy_for(config: Settings) -> Policy:
    """The policy of a config's ``compute_dtype``, ``fp8_scaling``, ``precision_policy``,
    ``task`` and ``nvfp4_hadamard`` settings."""
    settings = (config.compute_dtype, config.fp8_scaling, config.precision_policy, config.task)
    return Policy.of(*settings, nvfp4_hadamard=config.nvfp4_hadamard)


# The seed exercise's policy (bfloat16 compute) and its float32 twin's.
EXERCISE = Policy.of("bfloat16")
FLOAT32_TWIN = Policy(FULL_PRECISION)


def recipe_summaries(report: Any) -> dict[str, Any]:
    """Every recipe's summary hook run on ``report`` (a StepReport), by recipe name: another
    recipe's hook finds nothing of its own there and gives its empty value, so the keys stay the
    same whatever the compute dtype."""
    return {r.name: r.summary(report) for r in RECIPES.values() if r.summary is not None}
