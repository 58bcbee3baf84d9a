"""The recipe registry: every value of ``compute_dtype``, one frozen ``Recipe`` record each.

Rule: a ``Recipe`` is how the matmuls of a step compute. It names its formats (all in
``core.formats.dtypes.FORMATS``) and, when its matmuls quantize, the matmul that replaces every
``nnx.Linear``'s own. ``RECIPES`` holds them (bfloat16, float16, float8, and the block-scaled
mxfp8, fp8_block, nvfp4); adding a recipe is one entry here plus its float64 reference in the
contract test (``tests/core/model/test_registries.py``; "What each addition touches" in
docs/architecture.md lists the rest a block format or a setting of its own takes). An entry is
made one of two ways::

    plain_recipe(name)                 parameters and data cast to ``name``, nothing else
    block_recipe(spec, work, compile)  a block-scaled recipe (``core.recipes.block_formats``):
                                       every matmul quantized block by block forward and
                                       backward (``core.recipes.block_matmul``) in
                                       ``spec.element_format``, accumulated in float32

No other module tests a compute dtype's name: it asks its recipe (``recipe(name)``). A
recipe declares the settings only it takes (``Recipe.settings``: float8's ``fp8_scaling`` and
``amax_history``, NVFP4's Hadamard switch) and whether the inspector's block list shows it
(``Recipe.listed``); the page lays out, and the export ignores, what the registry declares.

Example::

    >>> COMPUTE_DTYPES[:3], recipe("float8").gradient_format, recipe("float8").plain_dtype
    (('bfloat16', 'float16', 'float8'), 'float8_e5m2', None)
    >>> COMPUTE_DTYPES[3:], recipe("nvfp4").gradient_format
    (('mxfp8', 'fp8_block', 'nvfp4'), 'float4_e2m1fn')
    >>> from playground.core.recipes.block_formats import NVFP4
    >>> nvfp4 = block_recipe(NVFP4, 1.7, ((2.0, 0.0),) * 3)
    >>> nvfp4.gradient_format, plain_recipe("float16").plain_dtype
    ('float4_e2m1fn', 'float16')
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from playground.core.bounds import Names
from playground.core.formats.dtypes import FORMATS
from playground.core.recipes.block_formats import FP8_BLOCK, MXFP8, NVFP4, BlockRecipe
from playground.core.recipes.block_matmul import block_dot_general
from playground.core.recipes.float8 import (
    FORWARD_FORMAT,
    GRADIENT_FORMAT,
    SCALINGS,
    float8_dot_general,
)
from playground.core.recipes.float8_report import quantized_summary

# The endpoints whose programs the cost model prices a compile for, in ``compile_cost`` order.
COMPILE_ENDPOINTS = ("step", "dynamics", "sweep")

# The dtype of the master parameters, and of the loss the step scales and returns.
FLOAT32 = "float32"


@dataclass(frozen=True)
class Recipe:
    """How the matmuls of a step compute: one entry of RECIPES.

    name: the ``compute_dtype`` setting's value.
    forward_format, gradient_format: names in ``core.formats.dtypes.FORMATS``: the format of every
      matmul's operands on the way forward (input, weights), and of the gradient arriving at its
      output on the way back.
    cast_dtype: what the temporary model's parameters and the data are cast to: the compute
      dtype of every operation a precision preset keeps low (a scaled recipe: float32).
    dot_general: the matmul of every ``nnx.Linear`` of the temporary model, called with the
      keywords ``meta`` (that matmul's statistics, see ``core.recipes.float8``) and ``scaling``
      (and, for a block recipe, ``hadamard`` and ``key``); None keeps nnx.Linear's own
      (``lax.dot_general`` on the cast operands).
    scalings: the per-tensor scalings it takes (the ``fp8_scaling`` setting); () for none.
    saturates: whether its casts clip a finite value beyond the format's largest to it (where a
      plain ``astype`` gives inf, or NaN in a format without an infinity).
    summary: its hook: StepReport -> what the summary shows under the recipe's name (JSON-able
      but for non-finite floats, as measured), or None.
    work_factor: the cost model's work per multiply-add of a pass, against a plain cast's 1.
    compile_cost: the cost model's compile of its programs against a plain cast's
      (``core.settings.compile_cost``), per endpoint in ``COMPILE_ENDPOINTS`` order: (factor on each
      dense layer's part, for its quantizers' code in every matmul forward and backward;
      seconds of its own programs, such as a block recipe's report).
    block: a block-scaled recipe's formats, blocks and scale rule (``core.recipes.block_formats``);
      None for every other recipe.
    settings: the settings fields only this recipe takes (they change nothing under another).
    listed: the inspector's block list (``sections.lab.block_list``) shows how it stores a
      typed list.
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
    compile_cost: tuple[tuple[float, float], ...] = ((1.0, 0.0),) * 3
    block: BlockRecipe | None = None
    settings: tuple[str, ...] = ()
    listed: bool = False

    def __post_init__(self) -> None:
        for fmt in (self.forward_format, self.gradient_format, self.cast_dtype):
            if fmt not in FORMATS:
                raise ValueError(f"a recipe's formats must be in FORMATS; got {fmt!r}")

    @property
    def plain_dtype(self) -> str | None:
        """The dtype of a plain cast recipe's only rounding; None when its matmuls quantize."""
        return self.cast_dtype if self.dot_general is None else None

    @property
    def quantizes(self) -> bool:  # its matmuls quantize (scales and statistics)
        return self.dot_general is not None

    @property
    def hadamard_setting(self) -> bool:
        """Whether the ``nvfp4_hadamard`` setting applies (its matmul has a Hadamard block)."""
        return "nvfp4_hadamard" in self.settings

    def compile_on(self, endpoint: str) -> tuple[float, float]:
        """(factor per dense layer, extra seconds) of its compile for ``endpoint``."""
        return self.compile_cost[COMPILE_ENDPOINTS.index(endpoint)]


def plain_recipe(name: str) -> Recipe:
    """The exercise's recipe for ``name``: parameters and data cast to it, nothing else."""
    return Recipe(name, forward_format=name, gradient_format=name, cast_dtype=name)


def block_recipe(
    spec: BlockRecipe,
    work_factor: float,
    compile_cost: tuple[tuple[float, float], ...],
    listed: bool = False,
) -> Recipe:
    """The block-scaled recipe of ``spec`` (see the module rule): its element format forward
    and backward, saturating (a block's scale bounds its values), float32 elsewhere; its
    summary hook lists the step's quantized tensors, as float8's does. One with a Hadamard
    block takes the ``nvfp4_hadamard`` setting."""
    return Recipe(
        spec.name,
        forward_format=spec.element_format,
        gradient_format=spec.element_format,
        cast_dtype=FLOAT32,
        dot_general=functools.partial(block_dot_general, recipe=spec),
        saturates=True,
        summary=functools.partial(quantized_summary, recipe_name=spec.name),
        work_factor=work_factor,
        compile_cost=compile_cost,
        block=spec,
        settings=("nvfp4_hadamard",) if spec.hadamard_block > 0 else (),
        listed=listed,
    )


# Compile against bfloat16's, per endpoint (step, dynamics, sweep): (factor on each dense
# layer's part, extra seconds), fitted to bench/bench_compile.py's first-call overheads and
# rounded up (fp8_block's runs and sweeps take mxfp8's).
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
            # Per-tensor scaling adds an amax, a multiply, a clip and a cast of every tensor.
            work_factor=1.25,
            compile_cost=FLOAT8_COMPILE,
            settings=("fp8_scaling", "amax_history"),
        ),
        # Block-scaled recipes (TransformerEngine 2.x's MXFP8BlockScaling, Float8BlockScaling,
        # NVFP4BlockScaling), emulated in float32 on CPU. Their work factors pay for a
        # quantize-dequantize of each operand per matmul, forward and backward, against
        # float32's forward and backward (bench/bench_blocks.py prints the ratios).
        block_recipe(MXFP8, work_factor=1.4, compile_cost=MXFP8_COMPILE, listed=True),
        block_recipe(FP8_BLOCK, work_factor=1.3, compile_cost=FP8_BLOCK_COMPILE),
        block_recipe(NVFP4, work_factor=2.0, compile_cost=NVFP4_COMPILE, listed=True),
    )
}
# What a step can compute in: the compute_dtype setting's choices, the exercise's first (read
# from RECIPES at every use).
COMPUTE_DTYPES = Names(RECIPES)
# The float32 twin: every cast an identity (not a choice of the setting).
FULL_PRECISION = plain_recipe(FLOAT32)


def recipe(name: str) -> Recipe:
    """The recipe registered as ``name``; ValueError naming the field and its choices."""
    if name not in RECIPES:
        raise ValueError(f"compute_dtype must be one of {', '.join(RECIPES)}; got {name!r}")
    return RECIPES[name]


def recipe_settings() -> tuple[str, ...]:
    """Every setting some recipe takes, each once, in the registry's order."""
    return tuple(dict.fromkeys(name for entry in RECIPES.values() for name in entry.settings))


def listed_recipes() -> tuple[str, ...]:
    """The recipes the inspector's block list shows (``Recipe.listed``), in the registry's order."""
    return tuple(name for name, entry in RECIPES.items() if entry.listed)


def saturating_formats() -> frozenset[str]:
    """The formats some recipe casts to with saturation (the inspector's saturated column)."""
    chosen = [r for r in RECIPES.values() if r.saturates]
    return frozenset(fmt for r in chosen for fmt in (r.forward_format, r.gradient_format))


def recipe_summaries(report: Any) -> dict[str, Any]:
    """Every recipe's summary hook run on ``report`` (a StepReport), by recipe name: another
    recipe's hook finds nothing of its own there and gives its empty value, so the keys stay the
    same whatever the compute dtype."""
    return {r.name: r.summary(report) for r in RECIPES.values() if r.summary is not None}
