"""The training dynamics as a JSON-able dict and as a few sentences with their numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from playground.sections.dynamics.train import DynamicsReport
from playground.views.numbers import json_number


def dynamics_summary(dynamics: DynamicsReport) -> dict[str, Any]:
    """Final losses, skip and lost-update counts and the reading, as a JSON-able dict."""
    return {
        "config": dynamics.config.to_dict(),
        "steps": dynamics.steps,
        "mode": dynamics.mode,
        "period": dynamics.period,
        "final_loss": {
            run: json_number(float(getattr(dynamics, f"{run}_loss")[-1]))
            for run in ("float32", "mixed", "pure")
        },
        "mixed_skipped_steps": np.flatnonzero(dynamics.mixed_skipped).tolist(),
        "mixed_applied_updates": dynamics.mixed_applied,
        "final_mixed_scale": json_number(float(dynamics.mixed_scale[-1])),
        "mean_lost_share": {
            "mixed": json_number(float(dynamics.mixed_lost_share.mean())),
            "pure": json_number(float(dynamics.pure_lost_share.mean())),
        },
        "reading": dynamics_reading(dynamics),
    }


def dynamics_reading(dynamics: DynamicsReport) -> list[str]:
    """What the three curves say, in numbers."""
    dtype = dynamics.config.compute_dtype

    def change(run: str) -> str:
        curve = getattr(dynamics, f"{run}_loss")  # initial, then after each update
        return f"{curve[0]:.4g} -> {curve[-1]:.4g}"

    sentences = [
        (
            f"Over {dynamics.steps} steps the loss went {change('float32')} in float32, "
            f"{change('mixed')} with {dtype} compute and float32 master weights, and "
            f"{change('pure')} with the parameters stored in {dtype}."
        ),
        (
            f"In the pure {dtype} run, {dynamics.pure_lost_share.mean():.1%} of the parameter "
            f"updates per step were rounded away entirely (p + delta == p); with float32 master "
            f"weights, {dynamics.mixed_lost_share.mean():.1%}."
        ),
    ]
    if dynamics.mode == "dynamic":
        skipped = np.flatnonzero(dynamics.mixed_skipped)
        listed = ", ".join(str(step) for step in skipped[:8])
        listed += ", ..." if skipped.size > 8 else ""
        sentences.append(
            f"Dynamic scaling skipped {skipped.size} of {dynamics.steps} updates"
            + (f" (steps {listed})" if skipped.size else "")
            + f" and ended at S = {dynamics.mixed_scale[-1]:.6g}."
        )
    return sentences
