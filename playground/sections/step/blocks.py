"""The block-scaling panel: what a block-scaled recipe did to the first layer's operands.

Rule: everything here is read from ``StepReport.blocks`` (``core.recipes.block_report``: the first
matmul's input x and kernel as the step starts) and ``StepReport.float8`` (every quantized
tensor's counts); nothing is computed beyond shares, maxima and minima. A report of another
recipe has no block report: the JSON's ``recipe_comparison`` then holds nulls, the note says
which compute dtypes fill the panel, and the map says the same.

    recipe_comparison(report)   the JSON summary's ``recipe_comparison``
    block_note(report)          the tab's Markdown: kernel, last block, shares, errors, lesson

The map of block scales is ``sections.step.block_map``'s.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from playground.core.lessons.blocks import outlier_claim
from playground.core.recipes.block_report import BlockReport
from playground.core.recipes.block_stats import CLASSES, COMPARISON_KEYS, OperandStats
from playground.core.recipes.registry import RECIPES
from playground.core.step.report import StepReport
from playground.views.numbers import json_number

# The tab's label (its id too), and the element a lesson brings into view.
BLOCK_TAB = "Block scaling"
OPERAND_LABELS = {"input": "input x", "kernel": "kernel"}


def block_recipes() -> list[str]:
    """The compute dtypes whose matmuls are block-scaled (the registry's, in its order)."""
    return [name for name, entry in RECIPES.items() if entry.block is not None]


def _block_extremes(stats: OperandStats) -> dict[str, float]:
    """The worst block for each class: the largest flushed and saturated shares, the smallest
    kept share (blocks of zeros, with no share, left out; NaN when every block is zeros)."""
    shares = stats.block_shares
    with warnings.catch_warnings():  # an all-NaN grid: numpy warns, and answers NaN anyway
        warnings.simplefilter("ignore", RuntimeWarning)
        return {
            "max_flushed": float(np.nanmax(shares["flushed"])),
            "max_saturated": float(np.nanmax(shares["saturated"])),
            "min_kept": float(np.nanmin(shares["kept"])),
        }


def _operand(blocks: BlockReport, role: str) -> dict[str, Any]:
    stats, per_tensor = blocks.operands[role], blocks.per_tensor[role]
    lost = (per_tensor.counts["flushed"] + per_tensor.subnormal) / max(per_tensor.nonzero, 1)
    return {
        "tensor": {name: json_number(stats.shares[name]) for name in CLASSES},
        "blocks": {k: json_number(v) for k, v in _block_extremes(stats).items()},
        "block_count": int(stats.scale_log2.size),
        "per_tensor_float8": {
            **{name: json_number(per_tensor.shares[name]) for name in CLASSES},
            "flushed_or_subnormal": json_number(lost),
        },
    }


def recipe_comparison(report: StepReport) -> dict[str, Any]:
    """The JSON summary's ``recipe_comparison``::

        recipe            the block recipe's name
        COMPARISON_KEYS   the first layer's forward output's relative errors against float32
                          (``core.recipes.block_stats``: in norm, and the medians of the rows')
        kernel            the kernel its matmuls ran, as a sentence
        block, last_block_size, operands (each operand's shares), lesson_holds

    A recipe that is not block-scaled gives ``recipe`` and COMPARISON_KEYS, all null. ``kernel``
    is never under a key ``path``, which gradio_client would take for a file to download.
    """
    blocks = report.blocks
    if blocks is None:
        empty = dict.fromkeys(COMPARISON_KEYS)
        return {"recipe": None, **empty}
    return {
        "recipe": blocks.recipe,
        **{key: json_number(value) for key, value in blocks.comparison.items()},
        "kernel": blocks.path,
        "block": blocks.block,
        "last_block_size": blocks.last_block,
        "operands": {role: _operand(blocks, role) for role in blocks.operands},
        "lesson_holds": outlier_claim(report).holds,
    }


def block_sentence(report: StepReport) -> str:
    """The reading's sentence on a block recipe: what it quantizes, in which blocks, and where
    the tab shows the rest (empty for another recipe's report)."""
    blocks = report.blocks
    if blocks is None:
        return ""
    return (
        f"The {blocks.recipe} recipe quantizes the input and weights of every matmul, and the "
        f"gradient arriving at its output, to {blocks.element_format} block by block: each "
        f"block of {blocks.block} values shares one {blocks.scale_format} scale set by its own "
        "largest entry. The products add up in "
        "float32, and the bias, the activations, the loss and the loss scale stay float32 (the "
        f"{BLOCK_TAB} tab shows the scales and what each block kept)."
    )


def _share(value: float) -> str:
    return f"{value:.2%}" if math.isfinite(value) else "n/a"


def _layout_line(blocks: BlockReport) -> str:
    weights = (
        f"{blocks.weight_tile[0]} x {blocks.weight_tile[1]} tiles for the kernel"
        if blocks.weight_tile
        else f"blocks of {blocks.block} down the kernel's columns"
    )
    count = -(-blocks.contraction // blocks.block)
    return (
        f"**{blocks.recipe}**: {blocks.element_format} values, one {blocks.scale_format} scale "
        f"per block of {blocks.block} along each row of x ({weights}). The first layer "
        f"contracts over D_in = {blocks.contraction:,} values: {count:,} blocks per row, the "
        f"last holding {blocks.last_block} real values (the rest zero padding).\n\n"
        f"Matmul kernel here: {blocks.path}."
    )


def _operand_rows(blocks: BlockReport) -> list[str]:
    header = (
        "| first layer | flushed | saturated | kept | worst block: flushed / saturated / kept "
        "| per-tensor float8: flushed or subnormal |"
    )
    rows = [header, "|---|---|---|---|---|---|"]
    for role, stats in blocks.operands.items():
        worst = _block_extremes(stats)
        per_tensor = blocks.per_tensor[role]
        lost = (per_tensor.counts["flushed"] + per_tensor.subnormal) / max(per_tensor.nonzero, 1)
        rows.append(
            f"| {OPERAND_LABELS[role]} | {_share(stats.shares['flushed'])} "
            f"| {_share(stats.shares['saturated'])} | {_share(stats.shares['kept'])} "
            f"| {_share(worst['max_flushed'])} / {_share(worst['max_saturated'])} / "
            f"{_share(worst['min_kept'])} | {_share(lost)} |"
        )
    return rows


def _tensor_rows(report: StepReport) -> list[str]:
    rows = [
        "| matmul | tensor | format | flushed | saturated | entries |",
        "|---|---|---|---|---|---|",
    ]
    for tensor in report.float8:
        size = max(tensor.size, 1)
        rows.append(
            f"| {tensor.layer} | {tensor.role} | {tensor.format} | {tensor.flushed / size:.2%} "
            f"| {tensor.saturated / size:.2%} | {tensor.size:,} |"
        )
    return rows


def _error_sentences(recipe: str, comparison: dict[str, float]) -> str:
    """The comparison's errors (``core.recipes.block_stats``' rule), and, when the norm and the
    typical row rank the two recipes differently, why they can."""
    norm = (comparison["output_rel_error"], comparison["per_tensor_float8_output_rel_error"])
    row = (comparison["median_row_rel_error"], comparison["per_tensor_float8_median_row_rel_error"])
    text = (
        f"The first layer's forward output against float64 (relative error, in norm): "
        f"{recipe} {norm[0]:.3g}; per-tensor float8 (E4M3, current scaling) {norm[1]:.3g}. "
        f"Row by row (the median of the output rows' own relative errors): {recipe} "
        f"{row[0]:.3g}; per-tensor float8 {row[1]:.3g}."
    )
    if (norm[0] < norm[1]) != (row[0] < row[1]):
        text += (
            " The two rank them differently: the norm weighs each row by the size of its "
            "output, so a few large rows (an outlier's) decide it; the median is a typical row."
        )
    return text


def block_note(report: StepReport) -> str:
    """The tab's Markdown (see the module rule)."""
    blocks = report.blocks
    if blocks is None:
        return (
            f"This panel fills for a block-scaled compute dtype ({', '.join(block_recipes())}); "
            f"this step computes in {report.config.compute_dtype}."
        )
    errors = _error_sentences(blocks.recipe, blocks.comparison)
    lesson = outlier_claim(report)
    taught = (
        lesson.sentence
        if lesson.holds
        else f"Outliers against one scale per tensor: not shown by this batch ({lesson.condition})."
    )
    return "\n".join(
        [
            _layout_line(blocks),
            "",
            *_operand_rows(blocks),
            "",
            "Each quantized tensor of this step (shares of all its entries):",
            "",
            *_tensor_rows(report),
            "",
            errors,
            "",
            taught,
        ]
    )
