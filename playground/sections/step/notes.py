"""What to notice in each of the step's tabs: one or two sentences computed from the report.

Rule: ``NOTES`` maps each tab label of ``tab.TABS`` to a function of the report. A note reads
the parameter the tab's charts draw first (``charts.shown_params``: the kernel, or a deeper
model's first weights); when that chart has nothing finite to draw, the note says so and why
(the first of ``causes.causes``, or the count of non-finite entries). A figure is stated only
to the digits that survive float32's rounding and XLA's CPU code on another processor (the
constants below; ``bench/figure_stability.py`` measures them).
"""

from __future__ import annotations

import math

import numpy as np

from playground.core.step.report import ParamReport, StepReport
from playground.sections.step.blocks import BLOCK_TAB, block_note
from playground.sections.step.causes import causes, forward_failure
from playground.sections.step.charts import shown_params
from playground.views.numbers import factor_text

# A loss that grew past this factor of its start is written as the factor (4 significant
# digits): as a percentage with two decimals it would state more digits than float32 holds.
FACTOR_FROM = 10.0
# The gap between the paths is given as a share of float32's own change only when that change
# spans at least this many float32 spacings of its loss: a smaller difference of two float32
# losses keeps too few digits for a share's (tiny data: about 900 spacings, and a share of
# 44422.2% on one processor, 44362.0% on another).
RESOLVED_SPACINGS = 10_000
# The worst entry's relative error divides by float32's smallest gradient entries, whose last
# digits differ from processor to processor: it is written to 2 significant digits.
WORST_DIGITS = 2


def _value(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else str(value).replace("nan", "NaN")


def _why_not_finite(report: StepReport) -> str:
    """The first cause of non-finite numbers, in a few words."""
    found = [code for code in causes(report) if code != "gradient_underflow"]
    failure = forward_failure(report)
    where = f" in {failure['operation']}, {failure['why']}" if failure else ""
    reasons = {
        "data_overflow": "the data are beyond float32's range",
        "forward_overflow": f"the {report.config.compute_dtype} forward pass overflows{where}",
        "scaled_gradient_overflow": (
            f"the loss scale {report.config.loss_scale:.6g} overflows the scaled gradients"
        ),
        "lr_divergence": f"the learning rate {report.config.lr:.6g} makes the step diverge",
    }
    return reasons[found[0]] if found else "see the reading above"


def _first(report: StepReport) -> ParamReport:
    return shown_params(report)[0]


def _change(before: float, after: float) -> str:
    if before == 0 or not math.isfinite(before) or not math.isfinite(after):
        return f"{_value(before)} to {_value(after)}"
    if abs(after / before) >= FACTOR_FROM:
        return f"{_value(before)} to {_value(after)} ({factor_text(after / before)})"
    return f"{_value(before)} to {_value(after)} ({(after - before) / abs(before):+.2%})"


def loss_note(report: StepReport) -> str:
    """Where each path's loss went, and how far apart the paths ended."""
    mixed = _change(report.mixed_initial_loss, report.mixed_new_loss)
    float32 = _change(report.float32_initial_loss, report.float32_new_loss)
    sentence = f"The mixed step took the loss from {mixed}; float32 from {float32}."
    if not math.isfinite(report.mixed_new_loss):
        return (
            f"{sentence} The mixed loss after the step is {_value(report.mixed_new_loss)}, so "
            f"it has no dot: {_why_not_finite(report)}."
        )
    if not math.isfinite(report.float32_new_loss):
        return (
            f"{sentence} float32's loss after the step is "
            f"{_value(report.float32_new_loss)}: {_why_not_finite(report)}."
        )
    gap = report.mixed_new_loss - report.float32_new_loss
    moved = report.float32_new_loss - report.float32_initial_loss
    spacing = float(np.spacing(np.float32(abs(report.float32_initial_loss))))
    if abs(moved) >= RESOLVED_SPACINGS * spacing:
        share = f", {abs(gap / moved):.1%} of float32's own change"
    elif moved:
        share = (
            f"; float32's own change is under {RESOLVED_SPACINGS:,} float32 spacings of its "
            "loss, too close to its rounding to compare with"
        )
    else:
        share = ""
    return f"{sentence} After the step they differ by {gap:.3g}{share}."


def histogram_note(report: StepReport) -> str:
    """How the mixed gradient's distribution departs from float32's, by what was lost."""
    param = _first(report)
    if param.nonfinite_count == param.size:
        return (
            f"Nothing to draw for the mixed path: all {param.size:,} {param.name} gradient "
            f"entries are inf or NaN, because {_why_not_finite(report)}."
        )
    lost = []
    if param.underflow_count:
        # A failed forward pass computes other values: its zeros are not flushed ones.
        failure = forward_failure(report)
        why = f"its forward pass failed in {failure['operation']}" if failure else "flushed"
        lost.append(
            f"{param.underflow_count:,} of {param.size:,} {param.name} gradient entries are 0 "
            f"in the mixed path but not in float32 ({why})"
        )
    if param.nonfinite_count:
        lost.append(f"{param.nonfinite_count:,} are inf or NaN and not drawn")
    if lost:
        return "; ".join(lost) + "."
    return (
        f"The mixed outline follows the float32 bars: no {param.name} gradient entry was lost "
        f"to zero or overflow, and the two differ by {param.norm_rel_error:.2g} in norm "
        "(relative to float32's)."
    )


def _worst(value: float) -> str:
    return f"{value:.{WORST_DIGITS}g}" if math.isfinite(value) else _value(value)


def comparison_note(report: StepReport) -> str:
    """How close the entries sit to the diagonal, by their relative errors."""
    param = _first(report)
    both = np.isfinite(param.mixed_grads) & np.isfinite(param.float32_grads)
    if not both.any():
        return (
            f"No finite points: all {param.size:,} mixed {param.name} gradient entries are inf "
            f"or NaN, because {_why_not_finite(report)}."
        )
    equal = int(np.sum(param.mixed_grads[both] == param.float32_grads[both]))
    return (
        f"On the dashed y = x line the paths agree: {equal:,} of {param.size:,} {param.name} "
        f"gradient entries are exactly equal; the median entry is off by "
        f"{_value(param.median_rel_error)} (relative), the worst by "
        f"{_worst(param.max_rel_error)}."
    )


def update_note(report: StepReport) -> str:
    """How large the updates are against their parameters, and how many did nothing."""
    param = _first(report)
    ratio = param.median_update_ratio
    if not math.isfinite(ratio):
        return (
            f"No update size to draw: the mixed {param.name} updates are not finite, because "
            f"{_why_not_finite(report)}."
        )
    zero = int(np.sum(param.updates == 0))
    size = f"10^{math.log10(ratio):.1f}" if ratio > 0 else "0"
    return (
        f"The median mixed {param.name} update is {ratio:.3g} ({size}) times the RMS of its "
        f"tensor; {zero:,} of {param.size:,} entries got no update at all and "
        f"{param.lost_update_count:,} nonzero updates were rounded away."
    )


def note_id(tab: str) -> str:
    """The elem_id (and output name) of a tab's note: ``note-loss``, ``note-update-sizes``."""
    return "note-" + tab.lower().replace(" ", "-")


# Each step tab's note, by tab label (the keys of tab.TABS).
NOTES = {
    "Loss": loss_note,
    "Gradient histograms": histogram_note,
    "Float32 comparison": comparison_note,
    "Update sizes": update_note,
    BLOCK_TAB: block_note,  # the block-scaling tab's (``ui.tabs.blocks``)
}
