"""What a block-scaled step reports beyond its tensors' counts: the first layer's operands.

Rule: for a step whose recipe is block-scaled (``Recipe.block``), on the batch's x and the first
matmul's kernel as the step starts (its float32 master values)::

    operands     per operand (input, kernel): ``core.recipes.block_stats.OperandStats`` under the
                 recipe (shares flushed, saturated and kept per tensor and per block, and the
                 log2 block-scale map) and under per-tensor float8 (E4M3, current scaling)
    comparison   ``core.recipes.block_stats.recipe_comparison``: the relative error of x @ kernel
                 against the exact product (float32 at the highest precision), for the recipe
                 and for per-tensor float8
    mxfp8_input  x's statistics under MXFP8, for the outlier lesson (``core.lessons.blocks``:
                 per-tensor float8 against MXFP8): the input's own for an MXFP8 step
    last_block   how many real values the last block of the contraction (D_in) holds
    path         which path the matmuls took here (``core.recipes.block_matmul.matmul_path``)

Another recipe gets None (nothing is computed). Everything is measured in one compiled program
per (shapes, recipe), which returns the counts per block and the products' row norms only; the
shares and the products' errors are then computed on the host. The step report measures the
comparison in the step's own program instead (``core.step.report``), where the recipe's and the
float32 products are the step's first ones: it passes its row norms to ``report_from``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.recipes.block_formats import MXFP8, BlockRecipe
from playground.core.recipes.block_matmul import matmul_path
from playground.core.recipes.block_quantize import last_block_size
from playground.core.recipes.block_stats import (
    OperandStats,
    comparison_from,
    comparison_measure,
    per_tensor_measure,
    per_tensor_stats,
    recipe_measure,
    recipe_stats,
)
from playground.core.recipes.registry import Recipe

# The operands measured on the host: the first matmul's input and kernel.
OPERANDS = ("input", "kernel")


@dataclass(frozen=True)
class BlockReport:
    """The first layer's operands under a block recipe (see the module rule)."""

    recipe: str
    element_format: str
    scale_format: str
    block: int
    weight_tile: tuple[int, int] | None
    contraction: int
    last_block: int
    path: str
    operands: dict[str, OperandStats]
    per_tensor: dict[str, OperandStats]
    comparison: dict[str, float]
    mxfp8_input: OperandStats


@functools.partial(jax.jit, static_argnums=(2, 3))
def _measured(x: jax.Array, kernel: jax.Array, recipe: BlockRecipe, compare: bool):
    """Every measurement of the report in one program: each operand's class counts under the
    recipe and under per-tensor float8, x's under MXFP8 for the lesson (None when the recipe
    is MXFP8: its input's are the same), and when ``compare``, the comparison's row norms."""
    values = {"input": x, "kernel": kernel}
    return {
        "operands": {role: recipe_measure(values[role], recipe, role) for role in OPERANDS},
        "per_tensor": {role: per_tensor_measure(values[role]) for role in OPERANDS},
        "mxfp8_input": None if recipe == MXFP8 else recipe_measure(x, MXFP8, "input"),
        "norms": comparison_measure(x, kernel, recipe) if compare else None,
    }


def measure(compute: Recipe, x: np.ndarray, kernel: np.ndarray, compare: bool = True) -> dict:
    """The host copy of ``_measured`` for ``x`` (N, K) and the first ``kernel`` (K, M) under
    ``compute``'s block recipe (which it must have)."""
    x, kernel = jnp.asarray(x, jnp.float32), jnp.asarray(kernel, jnp.float32)
    return jax.device_get(_measured(x, kernel, compute.block, compare)) | {
        "shapes": {"input": x.shape, "kernel": kernel.shape}
    }


def report_from(compute: Recipe, measured: dict, norms=None) -> BlockReport:
    """The BlockReport from ``measure``'s ``measured``, with the comparison from ``norms``
    (the row norms of ``block_stats.comparison_measure``) or else from ``measured``'s own."""
    spec, shapes = compute.block, measured["shapes"]
    operands = {role: recipe_stats(measured["operands"][role], shapes[role]) for role in OPERANDS}
    per_tensor = {
        role: per_tensor_stats(measured["per_tensor"][role], shapes[role]) for role in OPERANDS
    }
    mxfp8 = measured["mxfp8_input"]
    return BlockReport(
        recipe=spec.name,
        element_format=spec.element_format,
        scale_format=spec.scale_format,
        block=spec.block,
        weight_tile=spec.weight_tile,
        contraction=shapes["input"][1],
        last_block=last_block_size(shapes["input"][1], spec.block),
        path=matmul_path(spec),
        operands=operands,
        per_tensor=per_tensor,
        comparison=comparison_from(measured["norms"] if norms is None else norms),
        mxfp8_input=operands["input"] if mxfp8 is None else recipe_stats(mxfp8, shapes["input"]),
    )


def block_report(compute: Recipe, x: np.ndarray, kernel: np.ndarray) -> BlockReport | None:
    """The BlockReport of ``x`` (N, K) and the first ``kernel`` (K, M) under ``compute``, or
    None when its matmuls are not block-scaled."""
    if compute.block is None:
        return None
    return report_from(compute, measure(compute, x, kernel))
