"""Every recipe's step as JSON, two tables and a few computed sentences.

Rule: every number is read from the comparison (``core.compare.comparison``: its rows and memory
ledgers) or the registries (a recipe's formats, a format's bits and limits); nothing is typed
in. The sentences name the recipe closest to float32 here and, for each other recipe, how much
further it is and why: the non-finite, flushed and saturated gradient entries it has (each
only when there are some), else what it rounds and to how many bits, beside the closest's.
"""

from __future__ import annotations

import math
from typing import Any

from playground.core.compare.comparison import (
    ERROR_HIGH,
    ERROR_LOW,
    EXTRA_BINS,
    Comparison,
    RecipeRow,
)
from playground.core.compare.memory import PARTS, MemoryLedger
from playground.core.formats.dtypes import dtype_facts
from playground.core.recipes.registry import recipe
from playground.views.numbers import json_number

ROW_HEADER = (
    "| recipe | new loss | loss error | gradient error | flushed | saturated | non-finite "
    "| first non-finite |"
)
# The memory table's columns: the ZeRO paper's four parts, then a recipe's own together.
ZERO_PARTS = PARTS[:4]
MEMORY_HEADER = (
    "| recipe | bytes per parameter | working weights | gradients | master weights | optimizer "
    "state | quantized copies and scales | parameters | activations | total |"
)


def row_summary(row: RecipeRow) -> dict[str, Any]:
    """One row of the JSON's ``recipes`` (the module rule's numbers, floats JSON-safe)."""
    numbers = {
        "mixed_initial": row.mixed_initial,
        "mixed_new": row.mixed_new,
        "float32_initial": row.float32_initial,
        "float32_new": row.float32_new,
        "loss_error": row.loss_error,
        "loss_rel_error": row.loss_rel_error,
        "grad_rel_error": row.grad_rel_error,
        "flushed_share": row.flushed_share,
        "saturated_share": row.saturated_share,
        "nonfinite_share": row.nonfinite_share,
    }
    return {
        "recipe": row.recipe,
        **{name: json_number(value) for name, value in numbers.items()},
        "first_nonfinite": row.first_nonfinite,
        "entries": row.entries,
        "error_histogram": {
            "first": ERROR_LOW,
            "last": ERROR_HIGH,
            "counts": row.error_counts[: ERROR_HIGH - ERROR_LOW + 1].tolist(),
            **dict(
                zip(
                    EXTRA_BINS, row.error_counts[ERROR_HIGH - ERROR_LOW + 1 :].tolist(), strict=True
                )
            ),
        },
    }


def summarize(comparison: Comparison, sentences: list[str] | None = None) -> dict[str, Any]:
    """The ``compare`` endpoint's JSON: the config, one row and one ledger per recipe, the
    closest recipe and the reading."""
    closest = comparison.closest
    return {
        "config": comparison.config.to_dict(),
        "recipes": [row_summary(row) for row in comparison.rows],
        "closest": closest.recipe if closest else None,
        "memory": [ledger.as_dict() for ledger in comparison.memory],
        "reading": reading(comparison) if sentences is None else sentences,
    }


def _bits(fmt: str) -> int:
    """Significant bits of ``fmt``: its stored fraction and the implicit leading 1."""
    return dtype_facts(fmt).mantissa_bits + 1


def precision_words(name: str, subject: str) -> str:
    """What recipe ``name`` rounds, as a clause whose subject is ``subject``: a plain cast's
    parameters and data, or a quantizing recipe's matmul operands only (its formats' significant
    bits, and its scales), the rest in float32."""
    chosen = recipe(name)
    forward, gradient = chosen.forward_format, chosen.gradient_format
    if not chosen.quantizes:
        return (
            f"{subject} casts its parameters and data to {chosen.cast_dtype} "
            f"({_bits(chosen.cast_dtype)} significant bits)"
        )
    if forward == gradient:
        rounded = (
            f"its matmul operands and the gradients arriving at them, to {forward} "
            f"({_bits(forward)} significant bits"
        )
    else:
        rounded = (
            f"its matmul operands, to {forward} ({_bits(forward)} significant bits), and the "
            f"gradients arriving at them, to {gradient} ({_bits(gradient)} significant bits"
        )
    if chosen.block is not None:
        scales = f"one {chosen.block.scale_format} scale per {chosen.block.block} values"
    else:
        scales = "one float32 scale per tensor"
    return (
        f"{subject} quantizes only {rounded}, {scales}) and computes the rest in "
        f"{chosen.cast_dtype}"
    )


def _causes(row: RecipeRow) -> list[str]:
    """Why ``row`` is off float32, by its counts (each cause only when it has entries)."""
    gradient = recipe(row.recipe).gradient_format
    facts = dtype_facts(gradient)
    causes = []
    if row.nonfinite:
        where = [f"{op} ({way})" for way, op in row.first_nonfinite.items() if op]
        causes.append(
            f"{row.nonfinite_share:.2%} of its gradient entries are not finite"
            + (f", first at {' and '.join(where)}" if where else "")
        )
    if row.flushed:
        causes.append(
            f"{row.flushed_share:.2%} of its gradient entries are exactly zero where float32's "
            f"are not (rounded or flushed to zero; {gradient}'s smallest subnormal is "
            f"{facts.smallest_subnormal:.3g})"
        )
    if row.saturated:
        causes.append(
            f"{row.saturated_share:.2%} of the gradients its matmuls received were clipped to "
            f"{gradient}'s largest value, {facts.max:.4g}"
        )
    return causes


def reading(comparison: Comparison) -> list[str]:
    """The sentences of the module rule, the closest recipe first, then the others from the
    nearest to the farthest, then the memory ledger's extremes."""
    closest = comparison.closest
    if closest is None:
        return ["No recipe's gradient is finite here, so none is closest to float32."]
    first = (
        f"Here {closest.recipe} is closest to float32: its gradient differs by "
        f"{closest.grad_rel_error:.3g} in relative norm and its new loss by "
        f"{closest.loss_rel_error:.3g} relative; {precision_words(closest.recipe, 'it')}."
    )
    sentences = [first]
    others = [row for row in comparison.rows if row is not closest]
    others.sort(key=lambda row: _order(row.grad_rel_error))
    for row in others:
        if not math.isfinite(row.grad_rel_error):
            head = f"{row.recipe}'s gradient error is not finite ({row.grad_rel_error})"
        elif closest.grad_rel_error:
            ratio = row.grad_rel_error / closest.grad_rel_error
            head = (
                f"{row.recipe} is {ratio:.3g} times as far from float32 ({row.grad_rel_error:.3g})"
            )
        else:
            head = f"{row.recipe} is further from float32 ({row.grad_rel_error:.3g})"
        rounding = (
            "nothing was flushed, clipped or non-finite, so the difference is rounding: "
            f"{precision_words(row.recipe, 'it')}, while "
            f"{precision_words(closest.recipe, closest.recipe)}"
        )
        causes = _causes(row) or [rounding]
        sentences.append(f"{head}: {'; '.join(causes)}.")
    return sentences + [memory_sentence(comparison.memory)]


def _order(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def memory_sentence(memory: tuple[MemoryLedger, ...]) -> str:
    """Which recipe keeps the fewest and the most bytes per parameter, and which the fewest and
    the most activations."""
    fewest = min(memory, key=lambda ledger: ledger.bytes_per_param)
    most = max(memory, key=lambda ledger: ledger.bytes_per_param)
    lightest = min(memory, key=lambda ledger: ledger.activations)
    heaviest = max(memory, key=lambda ledger: ledger.activations)
    return (
        f"Per parameter, {fewest.recipe} keeps the fewest bytes ({fewest.bytes_per_param:.4g}) "
        f"and {most.recipe} the most ({most.bytes_per_param:.4g}), counted as the ZeRO paper "
        "does (working weights, gradients, float32 masters, optimizer state) plus each "
        f"recipe's quantized copies and scales; for {fewest.tokens:,} tokens the activations "
        f"the backward pass keeps take from {readable_bytes(lightest.activations)} "
        f"({lightest.recipe}) to {readable_bytes(heaviest.activations)} ({heaviest.recipe})."
    )


def readable_bytes(value: float) -> str:
    """Bytes in the largest unit that keeps a number of at least 1 (B, KiB, MiB, GiB, TiB)."""
    units = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
    power = min(int(math.log(value, 1024)) if value >= 1 else 0, len(units) - 1)
    return f"{value / 1024**power:.4g} {units[power]}"


def _share(value: float) -> str:
    return f"{value:.2%}" if value else "0"


def rows_table(comparison: Comparison) -> str:
    """The rows as a Markdown table."""
    lines = [ROW_HEADER, "|" + " --- |" * ROW_HEADER.count(" | ") + " --- |"]
    for row in comparison.rows:
        where = [f"{op} ({way})" for way, op in row.first_nonfinite.items() if op]
        lines.append(
            f"| {row.recipe} | {row.mixed_new:.6g} | {row.loss_error:+.3g} | "
            f"{row.grad_rel_error:.3g} | {_share(row.flushed_share)} | "
            f"{_share(row.saturated_share)} | {_share(row.nonfinite_share)} | "
            f"{', '.join(where) or 'none'} |"
        )
    return "\n".join(lines)


def memory_table(comparison: Comparison) -> str:
    """The ledgers as a Markdown table: bytes per parameter of the ZeRO paper's parts and of the
    recipe's own (its quantized copies, scales and amax history together), then totals."""
    lines = [MEMORY_HEADER, "|" + " --- |" * MEMORY_HEADER.count(" | ") + " --- |"]
    for ledger in comparison.memory:
        per_param = {name: value / ledger.parameters for name, value in ledger.parts.items()}
        own = sum(per_param[name] for name in PARTS if name not in ZERO_PARTS)
        parts = " | ".join(f"{per_param[name]:.4g}" for name in ZERO_PARTS)
        lines.append(
            f"| {ledger.recipe} | **{ledger.bytes_per_param:.4g}** | {parts} | {own:.4g} | "
            f"{readable_bytes(ledger.parameter_bytes)} | {readable_bytes(ledger.activations)} | "
            f"{readable_bytes(ledger.total_bytes)} |"
        )
    first = comparison.memory[0]
    lines.append(
        f"\nFor {first.parameters:,} parameters and {first.tokens:,} tokens per batch "
        "(activations per token at this model's widths); each part's bytes are in the JSON."
    )
    return "\n".join(lines)
