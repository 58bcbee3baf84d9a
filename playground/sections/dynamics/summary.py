"""The training dynamics as a JSON-able dict and as a few sentences with their numbers."""

from __future__ import annotations

from typing import Any

import numpy as np

from playground.core.data.synthetic import NOISE_STD
from playground.core.lessons.dynamics import chart_steps
from playground.core.lessons.loss_figures import final_loss, loss_path, loss_ratio, update_share
from playground.core.recipes.registry import recipe
from playground.core.runs.train import DynamicsReport
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
        # Updates lost before the optimizer: zero because their gradient underflowed (never
        # counted in mean_lost_share, whose updates were nonzero and rounded away).
        "mean_flushed_share": {
            run: json_number(float(_flushed(dynamics, run).mean())) for run in ("mixed", "pure")
        },
        # A saturating recipe (float8) only, empty otherwise: the steps in which the mixed run
        # saturated entries.
        "mixed_saturated_steps": np.flatnonzero(_saturated(dynamics)).tolist(),
        "reading": dynamics_reading(dynamics),
    }


def dynamics_reading(dynamics: DynamicsReport) -> list[str]:
    """What the three curves say, in numbers."""
    dtype = dynamics.config.compute_dtype
    rounding = dynamics.pure_rounding

    def change(run: str) -> str:
        return loss_path(getattr(dynamics, f"{run}_loss"))  # initial, then after each update

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
            f"{_share(dynamics, 'pure', dynamics.pure_lost_share.mean())} of the parameter "
            f"updates per step {LOST_WORDS[rounding]}; with float32 master weights, "
            f"{_share(dynamics, 'mixed', dynamics.mixed_lost_share.mean())} were rounded away."
        ),
        _flushed_sentence(dynamics),
        *_floor_note(dynamics),  # after the sentences tests and lessons read by position
    ]
    if dynamics.mode == "dynamic":
        skipped = np.flatnonzero(dynamics.mixed_skipped)
        listed = ", ".join(map(str, chart_steps(skipped[:8])))  # as the charts count steps
        listed += ", ..." if skipped.size > 8 else ""
        sentences.append(
            f"Dynamic scaling skipped {skipped.size} of {dynamics.steps} updates"
            + (f" (steps {listed})" if skipped.size else "")
            + f" and ended at S = {dynamics.mixed_scale[-1]:.6g}."
        )
    if recipe(dtype).saturates:
        sentences.append(_saturation_sentence(dynamics))
    return sentences


def _share(dynamics: DynamicsReport, run: str, share: float) -> str:
    """A share of the run's updates, as ``loss_figures`` writes one."""
    return update_share(float(share), getattr(dynamics, f"{run}_loss"))


def _flushed(dynamics: DynamicsReport, run: str) -> np.ndarray:
    shares = getattr(dynamics, f"{run}_flushed_share")
    return np.zeros(dynamics.steps) if shares is None else shares


def _flushed_sentence(dynamics: DynamicsReport) -> str:
    """The updates lost before the optimizer: zero because the gradient flushed to zero,
    averaged over every step; where the second half's average (the one the training lessons
    quote, once the gradients have shrunk) reads otherwise, that one too."""
    shares = {}
    for run in ("mixed", "pure"):
        flushed = _flushed(dynamics, run)
        whole = _share(dynamics, run, float(flushed.mean()))
        late = _share(dynamics, run, float(flushed[len(flushed) // 2 :].mean()))
        shares[run] = whole if late == whole else f"{whole} ({late} over the second half)"
    return (
        f"Apart from those, averaged over all {dynamics.steps} steps, {shares['mixed']} of the "
        f"mixed run's parameter updates per step and {shares['pure']} of the pure run's were "
        f"zero because their gradient underflowed to zero in {dynamics.config.compute_dtype} "
        "(float32's gradient at the same weights is not zero there): lost before the "
        "optimizer, with nothing left to round away."
    )


def _saturated(dynamics: DynamicsReport) -> np.ndarray:
    shares = dynamics.mixed_saturated_share
    return np.zeros(dynamics.steps) if shares is None else shares


FP8_SCALING_WORDS = {
    "none": "no per-tensor scaling",
    "current": "current scaling (each tensor's own amax, every step)",
    "delayed": "delayed scaling (the largest amax of the last {} steps)",
}


def _saturation_sentence(dynamics: DynamicsReport) -> str:
    """Which steps of the mixed run saturated (float8), and whether the next step recovered."""
    config = dynamics.config
    scalings = recipe(config.compute_dtype).scalings  # none: a block recipe's own scales
    scaling = (
        FP8_SCALING_WORDS[config.fp8_scaling].format(config.amax_history)
        if scalings
        else "its block scales (each block's own amax, every step)"
    )
    shares = _saturated(dynamics)
    steps = np.flatnonzero(shares)
    if not steps.size:
        return (
            f"With {config.compute_dtype} and {scaling}, no entry of the mixed run saturated in "
            "any step."
        )
    shown = chart_steps(steps[:8])  # as the charts' x axis counts them
    listed = ", ".join(map(str, shown)) + (", ..." if steps.size > 8 else "")
    sentence = (
        f"With {config.compute_dtype} and {scaling}, the mixed run saturated entries (clipped "
        f"to the format's largest value) in {steps.size} of {dynamics.steps} steps (steps "
        f"{listed}; at most {shares.max():.2%} of a step's quantized entries)"
    )
    followed = set(steps.tolist()) & set((steps + 1).tolist())
    if scalings and config.fp8_scaling == "delayed" and not followed:
        sentence += (
            ": each met an amax larger than its history held, and the next step, whose scale "
            "came from a history that now held it, fitted again"
        )
    return sentence + "."


def _floor_note(dynamics: DynamicsReport) -> list[str]:
    """What a final-loss gap on the synthetic regression does and does not say (none for a
    user's data or the classification task)."""
    if not dynamics.synthetic or dynamics.config.task != "regression":
        return []
    return [
        (
            "These runs fit one small synthetic regression (a random linear teacher, noise of "
            f"std {NOISE_STD:g}, the same batch every step), so a gap between float32's final "
            "loss and a low-precision run's is set by that format's precision (its rounding of "
            "weights, updates and outputs): the ratio measures rounding on this toy, and does "
            "not predict the loss gap of a language model trained on real data."
        )
    ]


def _pure_against_float32(dynamics: DynamicsReport) -> str:
    """The pure run's final loss against float32's, as a ratio when both are finite and > 0
    (each written as ``loss_figures`` writes a loss)."""
    pure, float32 = float(dynamics.pure_loss[-1]), float(dynamics.float32_loss[-1])
    said = (
        f"With {ROUNDING_NAMES[dynamics.pure_rounding]} the pure "
        f"{dynamics.config.compute_dtype} run ended at loss {final_loss(dynamics.pure_loss)} "
        f"against float32's {final_loss(dynamics.float32_loss)}"
    )
    if np.isfinite(pure) and np.isfinite(float32) and float32 > 0:
        return said + f": {loss_ratio(dynamics.pure_loss, dynamics.float32_loss)}."
    return said + "."
