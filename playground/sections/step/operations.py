"""Precision per operation, as the page and the summary show it: a table per step, the first
non-finite operation and the loss of the same outputs in both dtypes.

Rule: every value is read from the report (``StepReport.operations``, its two
``mixed_initial_loss_in_*`` losses and its config); nothing is computed here but their
differences. The table has one row per operation of the mixed step, in forward order: its name,
kind, the dtype it computed in, and whether its result, the gradient arriving at it and its
parameters' gradients were finite.
"""

from __future__ import annotations

from typing import Any

from playground.core.step.policy import policy_for
from playground.core.step.report import StepReport
from playground.views.numbers import json_number

HEADER = "| operation | kind | dtype | result | gradient at result | parameter gradients |"


def operation_losses(report: StepReport) -> dict[str, Any]:
    """The new ``losses.*`` keys: the mixed step's initial loss of the same outputs computed in
    the compute dtype and in float32."""
    return {
        "mixed_initial_in_compute_dtype": json_number(report.mixed_initial_loss_in_compute_dtype),
        "mixed_initial_in_float32": json_number(report.mixed_initial_loss_in_float32),
    }


def operations_summary(report: StepReport) -> dict[str, Any]:
    """The summary's ``operations`` key: the preset, the task, the table's rows and the first
    non-finite operation forward and backward (None where every value was finite)."""
    return {
        "precision_policy": report.config.precision_policy,
        "task": report.config.task,
        "rows": [
            {
                "operation": row.name,
                "kind": row.kind,
                "dtype": row.dtype,
                "forward_finite": row.forward_finite,
                "gradient_finite": row.gradient_finite,
                "params_finite": row.params_finite,
            }
            for row in report.operations
        ],
        "first_nonfinite": report.first_nonfinite,
    }


def _mark(finite: bool) -> str:
    return "finite" if finite else "**inf/NaN**"


def operations_markdown(report: StepReport) -> str:
    """The table, then a line naming the first non-finite operation and one comparing the loss
    computed in the compute dtype with the float32 one."""
    rows = [HEADER, "|---|---|---|---|---|---|"]
    for row in report.operations:
        params = _mark(row.params_finite) if row.kind in ("matmul", "normalisation") else "-"
        rows.append(
            f"| {row.name} | {row.kind} | {row.dtype} | {_mark(row.forward_finite)} | "
            f"{_mark(row.gradient_finite)} | {params} |"
        )
    first = first_nonfinite_sentence(report)
    lines = [
        title_sentence(report),
        "",
        *rows,
        "",
        " ".join(filter(None, (first, norm_note(report)))),
    ]
    return "\n".join([*lines, "", loss_sentence(report)])


def norm_note(report: StepReport) -> str:
    """Why the rows after a layer norm marked inf/NaN can be finite (empty when none are): the
    mark is its variance's, and 1 / sqrt(inf) = 0 turns each row whose variance overflowed into
    the norm's bias, a finite output."""
    rows = report.operations
    for index, row in enumerate(rows):
        if row.kind == "normalisation" and not row.forward_finite:
            after = rows[index + 1 :]
            if after and all(later.forward_finite for later in after):
                return (
                    f"{row.name} is marked for its variance, which is inf; its output is "
                    "finite, since 1 / sqrt(inf) = 0 turns each row whose variance overflowed "
                    "into the norm's bias: the operations after it are finite, though those "
                    "rows' inputs are erased."
                )
    return ""


def title_sentence(report: StepReport) -> str:
    """What the table is: the preset and the task (a classification's softmax named)."""
    config = report.config
    task = config.task
    if task == "classification":
        task += " (its softmax max-subtracted: x - max - log(sum(exp(x - max))))"
    norm = any(row.kind == "normalisation" for row in report.operations)
    return (
        f"**Precision per operation** (`precision_policy` = {config.precision_policy}, task "
        f"{task}): the dtype each operation of the mixed step computed in"
        + (" (a layer norm's result counts its variance too)." if norm else ".")
    )


def first_nonfinite_sentence(report: StepReport) -> str:
    """Where inf or NaN first appeared, forward and backward, in words: "On the way forward,
    inf or NaN first appeared in <operation>; on the way backward, in the gradient passed back
    from <operation>." (the backward part alone names what appeared)."""
    first = report.first_nonfinite
    if first == {"forward": None, "backward": None}:
        return "Every operation's result and gradient was finite."
    what = "inf or NaN first appeared in"
    parts = []
    if first["forward"] is not None:
        parts.append(f"forward, {what} {first['forward']}")
    if first["backward"] is not None:
        named = "in" if parts else what
        parts.append(f"backward, {named} the gradient passed back from {first['backward']}")
    return "On the way " + "; on the way ".join(parts) + "."


def loss_sentence(report: StepReport) -> str:
    """The loss of the same outputs in the compute dtype and in float32, and which one the step
    used (the preset's loss dtype)."""
    low = report.mixed_initial_loss_in_compute_dtype
    high = report.mixed_initial_loss_in_float32
    dtype = report.config.compute_dtype
    used = policy_for(report.config).loss_dtype
    return (
        f"The loss of the same outputs: {low:.7g} computed in {dtype}, {high:.7g} in float32 "
        f"(difference {low - high:.3g}); this step used the {used} one."
    )
