"""A compute recipe: how the matmuls of a step compute (one value of ``compute_dtype``).

Rule: a ``Recipe`` names its formats (all in ``core.dtypes.FORMATS``) and, when its matmuls
quantize, the matmul that replaces every ``nnx.Linear``'s own. The registry of recipes is
``core.policy.RECIPES``; this module holds the record and the two ways an entry is made::

    plain_recipe(name)                 parameters and data cast to ``name``, nothing else
    block_recipe(spec, work, compile)  a block-scaled recipe (``core.block_formats``): every
                                       matmul quantized block by block forward and backward
                                       (``core.block_matmul``) in ``spec.element_format``,
                                       accumulated in float32; the rest float32

Example::

    >>> from playground.core.block_formats import NVFP4
    >>> nvfp4 = block_recipe(NVFP4, 1.7, ((2.0, 0.0),) * 3)
    >>> nvfp4.gradient_format, plain_recipe("float16").plain_dtype
    ('float4_e2m1fn', 'float16')
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax

from playground.core.block_formats import BlockRecipe
from playground.core.block_matmul import block_dot_general
from playground.core.dtypes import FORMATS
from playground.core.float8_report import quantized_summary

# The endpoints whose programs the cost model prices a compile for, in ``compile_cost`` order.
COMPILE_ENDPOINTS = ("step", "dynamics", "sweep")

# The dtype of the master parameters, and of the loss the step scales and returns.
FLOAT32 = "float32"


@dataclass(frozen=True)
class Recipe:
    """How the matmuls of a step compute: one entry of RECIPES.

    name: the ``compute_dtype`` setting's value.
    forward_format, gradient_format: names in ``core.dtypes.FORMATS``: the format of every
      matmul's operands on the way forward (input, weights), and of the gradient arriving at its
      output on the way back.
    cast_dtype: what the temporary model's parameters and the data are cast to: the compute
      dtype of every operation a precision preset keeps low (a scaled recipe: float32).
    dot_general: the matmul of every ``nnx.Linear`` of the temporary model, called with the
      keywords ``meta`` (that matmul's statistics, see ``core.float8``) and ``scaling`` (and,
      for a block recipe, ``hadamard`` and ``key``); None keeps nnx.Linear's own
      (``lax.dot_general`` on the cast operands).
    scalings: the per-tensor scalings it takes (the ``fp8_scaling`` setting); () for none.
    saturates: whether its casts clip a finite value beyond the format's largest to it (where a
      plain ``astype`` gives inf, or NaN in a format without an infinity).
    summary: its hook: StepReport -> what the summary shows under the recipe's name (JSON-able
      but for non-finite floats, as measured), or None.
    work_factor: the cost model's work per multiply-add of a pass, against a plain cast's 1.
    compile_cost: the cost model's compile of its programs against a plain cast's
      (``core.compile_cost``), per endpoint in ``COMPILE_ENDPOINTS`` order: (factor on each
      dense layer's part, for its quantizers' code in every matmul forward and backward;
      seconds of its own programs, such as a block recipe's report).
    block: a block-scaled recipe's formats, blocks and scale rule (``core.block_formats``);
      None for every other recipe.
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
        return self.block is not None and self.block.hadamard_block > 0

    def compile_on(self, endpoint: str) -> tuple[float, float]:
        """(factor per dense layer, extra seconds) of its compile for ``endpoint``."""
        return self.compile_cost[COMPILE_ENDPOINTS.index(endpoint)]


def plain_recipe(name: str) -> Recipe:
    """The exercise's recipe for ``name``: parameters and data cast to it, nothing else."""
    return Recipe(name, forward_format=name, gradient_format=name, cast_dtype=name)


def block_recipe(
    spec: BlockRecipe, work_factor: float, compile_cost: tuple[tuple[float, float], ...]
) -> Recipe:
    """The block-scaled recipe of ``spec`` (see the module rule): its element format forward
    and backward, saturating (a block's scale bounds its values), float32 elsewhere; its
    summary hook lists the step's quantized tensors, as float8's does."""
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
    )
