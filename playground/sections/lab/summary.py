"""The precision lab's numbers: the magnitude counters and the sweep, as JSON and as sentences.

Rule: every number here is read from a report or from the dtype registry; nothing is typed in.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from playground.core.runs.sweep import SAFE_FACTOR, SweepReport
from playground.views.numbers import factor_text, json_number


def sweep_summary(sweep: SweepReport) -> dict[str, Any]:
    """The sweep's curves and its reading, as a JSON-able dict (the API's ``sweep`` output)."""
    curves = {
        "rel_error": sweep.rel_error,
        "underflow_share": sweep.underflow_share,
        "nonfinite_share": sweep.nonfinite_share,
        "new_loss": sweep.new_loss,
    }
    return {
        "config": sweep.config.to_dict(),
        "log2_scales": sweep.exponents.tolist(),
        **{name: [json_number(v) for v in values.tolist()] for name, values in curves.items()},
        "float32_new_loss": json_number(sweep.float32_new_loss),
        "safe_log2_scales": sweep.safe_exponents.tolist(),
        "reading": sweep_reading(sweep),
    }


def sweep_reading(sweep: SweepReport) -> list[str]:
    """Where the safe window lies, where the user's scale sits, what goes wrong outside it."""
    dtype = sweep.config.compute_dtype
    safe = sweep.safe_exponents
    current = math.log2(sweep.config.loss_scale)
    best = float(np.nanmin(np.where(np.isfinite(sweep.rel_error), sweep.rel_error, np.nan)))
    sentences = [
        f"Scales from 2^{safe.min()} to 2^{safe.max()} give {dtype} gradients within "
        f"{factor_text(SAFE_FACTOR)} the best relative error in the sweep ({best:.3g})."
        if safe.size
        else f"No scale in the sweep gives finite {dtype} gradients."
    ]
    # A scale between two powers of two is inside when both neighbours are safe.
    inside = {math.floor(current), math.ceil(current)} <= set(safe.tolist())
    sentences.append(
        f"Your loss scale 2^{current:.3g} is {'inside' if inside else 'outside'} that window."
    )
    if sweep.underflow_share[0] > 0:
        sentences.append(
            f"Without scaling, {sweep.underflow_share[0]:.1%} of the gradient entries come out "
            f"as zero in {dtype}."
        )
    overflowing = sweep.exponents[sweep.nonfinite_share > 0]
    if overflowing.size:
        sentences.append(
            f"From 2^{overflowing.min()} on, some scaled gradients overflow {dtype} to inf."
        )
    return sentences
