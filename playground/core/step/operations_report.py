"""Which operation of the mixed step ran in which dtype, and where inf or NaN first appeared.

Rule, for the operations of the step's initial forward pass (the model registry's
``operations``, then the loss), each with the finiteness flags the watched step returns
(``core.step.step``, ``core.model.op_policy.tap``)::

    dtype              the precision policy's dtype of its kind (a quantizing recipe's matmuls:
                       its forward format, scaled)
    forward_finite     its result held no inf or NaN (a layer norm: nor did its variance)
    gradient_finite    the gradient of S * loss arriving at its result held no inf or NaN
    params_finite      the gradients of the parameters it uses held none (True without any)

    first forward      the first operation, in forward order, whose forward_finite is False
    first backward     the backward pass runs from the loss to the input: S itself arrives at
                       the loss (in the loss dtype; "loss scale" when that is not finite), then
                       operation j's backward makes the gradient arriving at operation j - 1 and
                       its own parameters' gradients; the first j, from the last, whose products
                       are not all finite
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from playground.core.model.losses import LOSS_NAMES
from playground.core.model.models import MODELS, ModelChoice, Operation

LOSS_SCALE_OPERATION = "loss scale"


@dataclass(frozen=True)
class OperationReport:
    """One operation of the mixed step (see the module rule)."""

    name: str
    kind: str
    dtype: str
    forward_finite: bool
    gradient_finite: bool
    params_finite: bool


def step_operations(choice: ModelChoice, task: str) -> tuple[Operation, ...]:
    """The watched operations of a step: the model's, then its loss."""
    return (*MODELS[choice.name].operations(choice), Operation(LOSS_NAMES[task], "loss", None))


def operation_reports(
    operations: tuple[Operation, ...],
    dtypes: dict[str, str],
    flags: np.ndarray,
    nonfinite_params: dict[str, int],
) -> tuple[OperationReport, ...]:
    """The rows of the table from the step's flags: (2, operations) float32, row 0 the
    forward finiteness, row 1 the backward non-finiteness; ``dtypes`` by kind;
    ``nonfinite_params`` the count of non-finite scaled gradient entries by parameter name."""
    rows = []
    for index, operation in enumerate(operations):
        prefix = operation.params
        params_finite = prefix is None or not any(
            count for name, count in nonfinite_params.items() if name.startswith(prefix)
        )
        rows.append(
            OperationReport(
                name=operation.name,
                kind=operation.kind,
                dtype=dtypes[operation.kind],
                forward_finite=bool(flags[0, index]),
                gradient_finite=not bool(flags[1, index]),
                params_finite=params_finite,
            )
        )
    return tuple(rows)


def first_nonfinite(rows: tuple[OperationReport, ...]) -> dict[str, str | None]:
    """{"forward": name or None, "backward": name or None} (see the module rule)."""
    forward = next((row.name for row in rows if not row.forward_finite), None)
    backward = None
    if rows and not rows[-1].gradient_finite:
        backward = LOSS_SCALE_OPERATION
    else:
        for index in reversed(range(len(rows))):
            below = index > 0 and not rows[index - 1].gradient_finite
            if below or not rows[index].params_finite:
                backward = rows[index].name
                break
    return {"forward": forward, "backward": backward}
