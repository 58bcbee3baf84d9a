"""Where a loss curve stops being finite, and the cause its own run shows.

Rule, for each curve (float32, mixed, pure) whose loss is not finite at some step k (k updates
applied; the first such k), the cause is the first of these that the run's numbers show:

    k = 0            the loss before any update is already not finite in float32
    float32 too      the float32 run became non-finite at step j <= k, or its loss at step k is
                     above its initial loss: the learning rate makes every run diverge, whatever
                     the precision (for the float32 curve itself: its loss grew from the initial
                     value to the last finite one, or one update took it there)
    grew first       the curve's last finite loss is above its initial loss while float32 stayed
                     finite: the low-precision run diverged
    otherwise        one update was not finite in the compute dtype (at the loss scale that step
                     used, when it is not 1) while float32's loss stayed finite

Nothing else is claimed: the run records losses, scales and shares, not each gradient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from playground.sections.dynamics.curves import RunCurves

RUNS = ("float32", "mixed", "pure")


@dataclass(frozen=True)
class NanMark:
    """A curve's end: its ``run``, the first non-finite ``step``, ``word`` (NaN or inf), the
    last finite loss before it (None at step 0), a short cause for the chart and the full one."""

    run: str
    step: int
    word: str
    last_finite: float | None
    short: str
    cause: str

    @property
    def label(self) -> str:
        """The marker's text: ``NaN at step 12: <short cause>``."""
        return f"{self.word} at step {self.step}: {self.short}"

    @property
    def sentence(self) -> str:
        """The full sentence for the notes under the charts."""
        return f"The {self.run} run's loss is {self.word} from step {self.step}: {self.cause}."


def scale_text(scale: float) -> str:
    """A loss scale as the page writes it: 2^15 for a power of two, else its value."""
    exponent = math.log2(scale) if scale > 0 and math.isfinite(scale) else 0.5
    return f"2^{int(exponent)}" if exponent.is_integer() else f"{scale:.6g}"


def _first_nonfinite(curve: np.ndarray) -> int | None:
    bad = np.flatnonzero(~np.isfinite(curve))
    return int(bad[0]) if bad.size else None


def _grew(curve: np.ndarray, step: int) -> bool:
    return step >= 2 and float(curve[step - 1]) > float(curve[0])


def _float32_diverging(curves: RunCurves, step: int) -> bool:
    """The float32 run is non-finite by ``step``, or its loss there is above its initial one."""
    float32 = curves.float32_loss
    bad = _first_nonfinite(float32)
    return (bad is not None and bad <= step) or float(float32[step]) > float(float32[0])


def _mark(curves: RunCurves, run: str, step: int) -> NanMark:
    curve = curves.loss(run)
    word = "NaN" if np.isnan(curve[step]) else "inf"
    last = float(curve[step - 1]) if step else None
    dtype = curves.compute_dtype
    float32_bad = _first_nonfinite(curves.float32_loss)
    if step == 0:
        short = "loss not finite before training"
        cause = "the loss before any update is already not finite in float32 (the data's scale)"
    elif run == "float32" or _float32_diverging(curves, step):
        short = "diverged" if run == "float32" else "diverged (float32 too)"
        if run == "float32":
            cause = (
                f"its loss grew from {curve[0]:.4g} to {last:.4g} first: the updates diverged"
                if _grew(curve, step)
                else f"one update took its loss from {last:.4g} to {word}"
            )
        elif float32_bad is not None and float32_bad <= step:
            cause = (
                f"the float32 run became non-finite too (at step {float32_bad}): at this "
                f"learning rate ({curves.settings.get('lr', '?')}) every run diverges, whatever "
                "the precision"
            )
        else:
            float32 = curves.float32_loss
            cause = (
                f"the float32 run is diverging too (its loss went from {float32[0]:.4g} to "
                f"{float32[step]:.4g} by step {step}): at this learning rate "
                f"({curves.settings.get('lr', '?')}) every run diverges, and the {dtype} run "
                "left its range first"
            )
    elif _grew(curve, step):
        short = f"diverged in {dtype}"
        cause = (
            f"its loss grew from {curve[0]:.4g} to {last:.4g} first, while float32's stayed "
            f"finite ({curves.float32_loss[step]:.4g}): the {dtype} run diverged"
        )
    else:
        scale = float(curves.scale(run)[step - 1])
        at = f" at loss scale S = {scale_text(scale)}" if scale != 1 else ""
        what = "step" if run == "mixed" else "update of its parameters"
        short = f"{dtype} {what.split()[0]} not finite"
        short += f" (S = {scale_text(scale)})" if at else ""
        cause = (
            f"the {dtype} {what}{at} was not finite, while float32's loss stayed finite "
            f"({curves.float32_loss[step]:.4g})"
        )
    return NanMark(run, step, word, last, short, cause)


def nan_marks(curves: RunCurves) -> list[NanMark]:
    """Each curve's first non-finite step and its cause (see the rule), in RUNS order."""
    marks = []
    for run in RUNS:
        step = _first_nonfinite(curves.loss(run))
        if step is not None:
            marks.append(_mark(curves, run, step))
    return marks
