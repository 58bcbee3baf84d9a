"""The matmuls' accumulation, as the summary and the reading show it.

Rule: every value is read from the report's ``accumulation`` (``core.step.accumulation_report``)
and the accumulator's bits from ``core.formats.accumulation``; nothing is computed here. The
summary's ``accumulation`` key always holds the first layer's errors; the reading adds a
sentence only when the accumulation is emulated (float32's is XLA's own: today's step).
"""

from __future__ import annotations

from typing import Any

from playground.core.formats.accumulation import ACCUMULATOR_BITS
from playground.core.step.accumulation_report import GROWTH_D_IN
from playground.core.step.report import StepReport
from playground.views.numbers import json_number


def accumulation_summary(report: StepReport) -> dict[str, Any] | None:
    """The summary's ``accumulation`` key: the setting, ``output_rel_error`` (the first layer's
    accumulator output against a float64 product), float32 accumulation's on the same rows,
    and (emulated only) the growth with D_in, without and with promotion."""
    figures = report.accumulation
    if figures is None:
        return None
    return {
        "accumulation": figures.accumulation,
        "significant_bits": ACCUMULATOR_BITS[figures.accumulation],
        "promotion_interval": figures.promotion_interval,
        "output_rel_error": json_number(figures.output_rel_error),
        "float32_output_rel_error": json_number(figures.float32_output_rel_error),
        "rows": figures.rows,
        "growth": [
            {
                "d_in": d_in,
                "rel_error": json_number(plain),
                "promoted_rel_error": json_number(promoted),
            }
            for d_in, plain, promoted in zip(
                GROWTH_D_IN, figures.growth_error, figures.growth_promoted_error, strict=False
            )
        ],
        "growth_promotion_interval": figures.growth_interval,
    }


def accumulation_sentences(report: StepReport) -> list[str]:
    """One sentence under an emulated accumulation (see the rule), else none."""
    figures = report.accumulation
    if figures is None or not figures.growth_error:
        return []
    bits = ACCUMULATOR_BITS[figures.accumulation]
    promoted = (
        f", promoted to float32 every {figures.promotion_interval} products"
        if figures.promotion_interval
        else ", never promoted"
    )
    low, high = min(figures.growth_promoted_error), max(figures.growth_promoted_error)
    sentence = (
        f"Every matmul accumulates in a running sum of {bits} significant bits "
        f"({figures.accumulation}){promoted}: the first layer's output is off by "
        f"{figures.output_rel_error:.3g} (relative, in norm) against a float64 product on the "
        f"batch's first {figures.rows} rows, where float32 accumulation is off by "
        f"{figures.float32_output_rel_error:.3g}. On standard-normal operands, never promoted, "
        f"the error is {figures.growth_error[0]:.3g} at D_in = {GROWTH_D_IN[0]} and "
        f"{figures.growth_error[-1]:.3g} at D_in = {GROWTH_D_IN[-1]}; promoted every "
        f"{figures.growth_interval} products, between {low:.3g} and {high:.3g} at every D_in "
        f"from {GROWTH_D_IN[0]} to {GROWTH_D_IN[-1]}."
    )
    return [sentence]
