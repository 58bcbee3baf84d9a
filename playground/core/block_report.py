"""What a block-scaled step reports beyond its tensors' counts: the first layer's operands.

Rule: for a step whose recipe is block-scaled (``Recipe.block``), on the batch's x and the first
matmul's kernel as the step starts (its float32 master values)::

    operands     per operand (input, kernel): ``core.block_stats.OperandStats`` under the
                 recipe (shares flushed, saturated and kept per tensor and per block, and the
                 log2 block-scale map) and under per-tensor float8 (E4M3, current scaling)
    comparison   ``core.block_stats.recipe_comparison``: the relative error of x @ kernel
                 against the exact product (float32 at the highest precision), for the recipe
                 and for per-tensor float8
    lesson       ``core.block_outliers.outlier_lesson(x)``: per-tensor float8 against MXFP8
    last_block   how many real values the last block of the contraction (D_in) holds
    path         which path the matmuls took here (``core.block_matmul.matmul_path``)

Another recipe gets None (nothing is computed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from playground.core.block_matmul import matmul_path
from playground.core.block_outliers import OutlierLesson, outlier_lesson
from playground.core.block_quantize import last_block_size
from playground.core.block_stats import (
    OperandStats,
    per_tensor_float8_stats,
    recipe_comparison,
    recipe_operand_stats,
)
from playground.core.recipe import Recipe

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
    lesson: OutlierLesson


def block_report(compute: Recipe, x: np.ndarray, kernel: np.ndarray) -> BlockReport | None:
    """The BlockReport of ``x`` (N, K) and the first ``kernel`` (K, M) under ``compute``, or
    None when its matmuls are not block-scaled."""
    spec = compute.block
    if spec is None:
        return None
    values = {"input": np.asarray(x, np.float32), "kernel": np.asarray(kernel, np.float32)}
    return BlockReport(
        recipe=spec.name,
        element_format=spec.element_format,
        scale_format=spec.scale_format,
        block=spec.block,
        weight_tile=spec.weight_tile,
        contraction=values["input"].shape[1],
        last_block=last_block_size(values["input"].shape[1], spec.block),
        path=matmul_path(spec),
        operands={role: recipe_operand_stats(values[role], spec, role) for role in OPERANDS},
        per_tensor={role: per_tensor_float8_stats(values[role]) for role in OPERANDS},
        comparison=recipe_comparison(values["input"], values["kernel"], spec),
        lesson=outlier_lesson(values["input"]),
    )
