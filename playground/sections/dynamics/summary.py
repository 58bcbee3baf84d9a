"""The training dynamics as a JSON-able dict and as a few sentences with their numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from playground.sections.dynamics.train import DynamicsReport
from playground.views.numbers import json_number

# The pure run's rounding by name, and how it stores p + update, as the reading says them.
ROUNDING_NAMES = {
    "nearest": "round-to-nearest",
    "stochastic": "stochastic rounding",
    "kahan": "Kahan summation",
}
ROUNDING_WORDS = {
    "nearest": "rounded to nearest",
    "stochastic": "rounded stochastically",
    "kahan": "updated with Kahan compensation",
}
# What a lost update is under each rounding (see DynamicsReport), as the reading says it.
LOST_WORDS = {
    "nearest": "were rounded away entirely (p + delta == p)",
    "stochastic": (
        "were lost: the random draw rounded p + delta back to p, and no remainder is kept"
    ),
    "kahan": "were lost: they moved neither p nor its compensation buffer",
}


def dynamics_summary(dynamics: DynamicsReport) -> dict[str, Any]:
    """Final losses, skip and lost-update counts and the reading, as a JSON-able dict."""
    return {
        "config": dynamics.config.to_dict(),
        "steps": dynamics.steps,
        "mode": dynamics.mode,
        "period": dynamics.period,
        "pure_rounding": dynamics.pure_rounding,
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
    rounding = dynamics.pure_rounding

    def change(run: str) -> str:
        curve = getattr(dynamics, f"{run}_loss")  # initial, then after each update
        return f"{curve[0]:.4g} -> {curve[-1]:.4g}"

    sentences = [
        (
            f"Over {dynamics.steps} steps the loss went {change('float32')} in float32, "
            f"{change('mixed')} with {dtype} compute and float32 master weights, and "
            f"{change('pure')} with the parameters stored in {dtype} and "
            f"{ROUNDING_WORDS[rounding]}."
        ),
        _pure_against_float32(dynamics),
        (
            f"In the pure {dtype} run ({ROUNDING_NAMES[rounding]}), "
            f"{dynamics.pure_lost_share.mean():.1%} of the parameter updates per step "
            f"{LOST_WORDS[rounding]}; with float32 master weights, "
            f"{dynamics.mixed_lost_share.mean():.1%} were rounded away."
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


def _pure_against_float32(dynamics: DynamicsReport) -> str:
    """The pure run's final loss against float32's, as a ratio when both are finite and > 0."""
    pure, float32 = float(dynamics.pure_loss[-1]), float(dynamics.float32_loss[-1])
    said = (
        f"With {ROUNDING_NAMES[dynamics.pure_rounding]} the pure "
        f"{dynamics.config.compute_dtype} run ended at loss {pure:.4g} against float32's "
        f"{float32:.4g}"
    )
    if np.isfinite(pure) and np.isfinite(float32) and float32 > 0:
        return said + f": {pure / float32:.4g}x."
    return said + "."
