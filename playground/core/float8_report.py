"""What a float8 step reports: every quantized tensor's statistics, and its summary hook.

Rule: a float8 step measures three tensors per matmul (``core.float8``: its input and kernel,
cast to E4M3 forward, and the gradient arriving at its output, cast to E5M2 backward). Each
becomes a ``Float8Tensor`` of the step report, layer by layer in parameter order, and the
recipe's summary hook lists them, field by field (the summary shows the list under the recipe's
name)::

    float8_summary(report) = [vars(tensor) for tensor in report.float8]

A report of another recipe has no quantized tensor, so the hook gives an empty list there: the
JSON carries the same keys whatever the compute dtype.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from playground.core.float8 import ROLE_FORMATS, ROLES, STATS


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


def float8_tensors(stats: np.ndarray, layers: Sequence[str]) -> tuple[Float8Tensor, ...]:
    """The (layers, roles, STATS) statistics of a step as Float8Tensors, layer by layer."""
    tensors = []
    for layer, rows in zip(layers, stats, strict=True):
        for role, row in zip(ROLES, rows, strict=True):
            values = dict(zip(STATS, row.tolist(), strict=True))
            counts = {name: int(values[name]) for name in ("saturated", "flushed", "size")}
            tensors.append(
                Float8Tensor(
                    layer, role, ROLE_FORMATS[role], values["amax"], values["scale"], **counts
                )
            )
    return tuple(tensors)


class QuantizedReport(Protocol):
    """What the hook reads of a ``core.step_report.StepReport`` (named structurally: the step
    report's module sits above the recipe registry, which holds this hook)."""

    float8: tuple[Float8Tensor, ...]


def float8_summary(report: QuantizedReport) -> list[dict[str, Any]]:
    """The float8 recipe's summary hook (see the rule): one dict per quantized tensor (layer,
    role, format, amax, scale, saturated, flushed, size). The floats are as measured (an amax
    may be inf or NaN after an overflow); the page writes them as JSON numbers."""
    return [dict(vars(tensor)) for tensor in report.float8]
