"""A checkpoint seen through every training recipe: the record ``python -m playground
inspect`` writes.

Rule::

    for each tensor of the checkpoint (``checkpoint.checkpoint_entries``), one at a time:
        floating point -> its name, shape, dtype (safetensors' code), non-finite entries by
                          kind, and each recipe's statistics (``recipe_stats.tensor_stats``)
                          of the whole tensor, or of a sample of at most ``sample`` values
        integer, bool  -> listed with empty ``nonfinite`` counts and no recipes
    keep_high_precision: the tensors TransformerEngine's AutoswitchGemm would run in high
        precision: for any recipe of ``rule_recipes`` (default: every FP8 and FP4 recipe,
        so a tensor is listed unless all of them are safe),
        underflow > underflow_threshold (5%, AutoswitchGemm's underflow_threshold_pct)
        or mse > mse_threshold (1e-4, its mse_threshold)
    values_per_second: the values analysed over the wall time of the whole pass (reading
        included)

The record is strict JSON: a float that is not finite is written as null.

Example::

    >>> import json, tempfile, numpy as np
    >>> from safetensors.numpy import save_file
    >>> folder = tempfile.mkdtemp()
    >>> save_file({"w": np.full((2, 32), 1e-3, np.float32)}, f"{folder}/model.safetensors")
    >>> record = inspect_checkpoint(folder)
    >>> round(record["tensors"][0]["recipes"]["float8_current"]["rel_error"], 6)
    0.0
    >>> record["keep_high_precision"]
    []
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from playground.core.tensors.checkpoint import FLOATING, checkpoint_entries, read_matrix
from playground.core.tensors.recipe_stats import QUANTIZED, is_gradient, tensor_stats

UNDERFLOW_THRESHOLD = 0.05
MSE_THRESHOLD = 1e-4
Progress = Callable[[int, int, int, float], None]


def _strict(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(item) for item in value]
    return value


def keeps_high_precision(
    recipes: dict[str, dict[str, float | None]],
    underflow_threshold: float = UNDERFLOW_THRESHOLD,
    mse_threshold: float = MSE_THRESHOLD,
    rule_recipes: tuple[str, ...] = QUANTIZED,
) -> bool:
    """Whether AutoswitchGemm's rule keeps a tensor in high precision (see the module rule)."""
    for name in rule_recipes:
        stats = recipes.get(name) or {}
        underflow, mse = stats.get("underflow"), stats.get("mse")
        if underflow is not None and underflow > underflow_threshold:
            return True
        if mse is not None and mse > mse_threshold:
            return True
    return False


def kept_by_recipe(
    record: dict[str, Any],
    underflow_threshold: float = UNDERFLOW_THRESHOLD,
    mse_threshold: float = MSE_THRESHOLD,
    rule_recipes: tuple[str, ...] = QUANTIZED,
) -> dict[str, list[str]]:
    """For each recipe of ``rule_recipes`` on its own, the record's tensors AutoswitchGemm's
    rule keeps in high precision: the answer for the one recipe an engineer trains with."""
    return {
        name: [
            row["name"]
            for row in record["tensors"]
            if row["recipes"]
            and keeps_high_precision(row["recipes"], underflow_threshold, mse_threshold, (name,))
        ]
        for name in rule_recipes
    }


def inspect_checkpoint(
    path: str | os.PathLike,
    sample: int | None = None,
    underflow_threshold: float = UNDERFLOW_THRESHOLD,
    mse_threshold: float = MSE_THRESHOLD,
    rule_recipes: tuple[str, ...] = QUANTIZED,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """The record of the checkpoint at ``path`` (see the module rule).

    Args:
      path: a safetensors file, a folder of shards with its index, a Hugging Face model folder
        (or the hub cache's models--ORG--NAME), or a hub id ORG/NAME.
      sample: at most this many values per tensor (None: every value).
      underflow_threshold, mse_threshold: AutoswitchGemm's thresholds.
      rule_recipes: the recipes the keep-high-precision rule reads.
      progress: called after each tensor with (tensors done, tensors, values, seconds).

    Returns:
      ``{"tensors": [...], "keep_high_precision": [...], "values_per_second": float}``.

    Raises:
      CheckpointError: the path is not a checkpoint this reads.
    """
    entries = checkpoint_entries(path)
    start = time.perf_counter()
    rows, kept, values = [], [], 0
    for done, entry in enumerate(entries, 1):
        row: dict[str, Any] = {
            "name": entry.name,
            "shape": list(entry.shape),
            "dtype": entry.dtype,
            "nonfinite": {"nan": 0, "posinf": 0, "neginf": 0},
            "recipes": {},
        }
        if entry.dtype in FLOATING:
            matrix = read_matrix(entry, sample)
            stats = tensor_stats(matrix, gradient=is_gradient(entry.name))
            values += matrix.size
            row["nonfinite"] = stats.nonfinite
            row["recipes"] = {name: asdict(result) for name, result in stats.recipes.items()}
            if keeps_high_precision(
                row["recipes"], underflow_threshold, mse_threshold, rule_recipes
            ):
                kept.append(entry.name)
        rows.append(row)
        if progress is not None:
            progress(done, len(entries), values, time.perf_counter() - start)
    seconds = time.perf_counter() - start
    return _strict(
        {
            "tensors": rows,
            "keep_high_precision": kept,
            "values_per_second": values / seconds if seconds > 0 else None,
        }
    )
