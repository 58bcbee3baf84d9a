"""What a quantizing step reports: every quantized tensor's statistics, and its summary hook.

Rule: a quantizing step (float8, ``core.recipes.float8``; a block-scaled recipe,
``core.recipes.block_matmul``)
measures three tensors per matmul: its input and kernel, quantized to the recipe's forward
format, and the gradient arriving at its output, quantized to its gradient format. Each becomes
a ``Float8Tensor`` of the step report, layer by layer in parameter order, and each quantizing
recipe's summary hook lists them, field by field (the summary shows the list under the
recipe's name)::

    quantized_summary(report, name) = [vars(tensor) for tensor in report.float8]
                                      if the report's compute_dtype is name, else []

so another recipe's hook gives an empty list: the JSON carries the same keys whatever the
compute dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from playground.core.recipes.float8 import ROLE_FORMATS, ROLES, STATS


@dataclass(frozen=True)
class Float8Tensor:
    """One quantized tensor of a float8 step: which matmul (named by its kernel), which role,
    its format, and its STATS (amax before scaling, the scale used, entries saturated to +-max
    where a plain cast would have overflowed, nonzero entries flushed to zero, entries in
    all)."""

    layer: str
    role: str
    format: str
    amax: float
    scale: float
    saturated: int
    flushed: int
    size: int


def float8_tensors(
    stats: np.ndarray, layers: Sequence[str], formats: Sequence[str] | None = None
) -> tuple[Float8Tensor, ...]:
    """The (layers, roles, STATS) statistics of a step as Float8Tensors, layer by layer;
    ``formats``: each role's format (default: float8's, E4M3 forward and E5M2 backward)."""
    role_formats = ROLE_FORMATS if formats is None else dict(zip(ROLES, formats, strict=True))
    tensors = []
    for layer, rows in zip(layers, stats, strict=True):
        for role, row in zip(ROLES, rows, strict=True):
            values = dict(zip(STATS, row.tolist(), strict=True))
            counts = {name: int(values[name]) for name in ("saturated", "flushed", "size")}
            tensors.append(
                Float8Tensor(
                    layer, role, role_formats[role], values["amax"], values["scale"], **counts
                )
            )
    return tuple(tensors)


class QuantizedReport(Protocol):
    """What the hook reads of a ``core.step.report.StepReport`` (named structurally: the step
    report's module sits above the recipe registry, which holds this hook)."""

    config: Any
    float8: tuple[Float8Tensor, ...]


def quantized_summary(report: QuantizedReport, recipe_name: str) -> list[dict[str, Any]]:
    """The summary hook of the quantizing recipe ``recipe_name`` (see the rule): one dict per
    quantized tensor (layer, role, format, amax, scale, saturated, flushed, size) of a step of
    that recipe. The floats are as measured (an amax may be inf or NaN after an overflow); the
    page writes them as JSON numbers."""
    if report.config.compute_dtype != recipe_name:
        return []
    return [dict(vars(tensor)) for tensor in report.float8]
