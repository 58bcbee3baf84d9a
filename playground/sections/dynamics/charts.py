"""Plotly figures of the training dynamics: losses, the lost-update meter, the loss scale."""

from __future__ import annotations

import numpy as np

from playground.core.policy import recipe
from playground.core.train import DynamicsReport
from playground.sections.dynamics.summary import ROUNDING_NAMES
from playground.views.plotly import (
    FLOAT32_COLOR,
    LOG_FORMAT,
    MAX_POINTS,
    MIXED_COLOR,
    OVERFLOW_COLOR,
    Figure,
    base_layout,
    line_trace,
    subsample,
)


def dynamics_loss_figure(dynamics: DynamicsReport) -> Figure:
    """float32 loss of the three runs' parameters after 0, 1, ..., K steps (log scale)."""
    dtype = dynamics.config.compute_dtype
    picked = subsample(dynamics.steps + 1)
    x = picked.tolist()  # the number of updates applied: 0 is the initial loss
    data = [
        line_trace(x, dynamics.float32_loss[picked], "float32", FLOAT32_COLOR),
        line_trace(
            x, dynamics.mixed_loss[picked], f"mixed ({dtype}, float32 masters)", MIXED_COLOR
        ),
        line_trace(
            x,
            dynamics.pure_loss[picked],
            f"pure {dtype} parameters ({ROUNDING_NAMES[dynamics.pure_rounding]})",
            OVERFLOW_COLOR,
            line={"color": OVERFLOW_COLOR, "width": 2, "dash": "dash"},
        ),  # fmt: skip
    ]
    layout = base_layout(
        "Loss over the steps", "step (0 = before training)", "MSE (float32, log scale)"
    )
    # Each tick labelled with its value. A curve spanning under 1000x (the usual case) gets
    # ticks at 1, 2 and 5 per decade: Plotly's own choice there, every digit, labels 0.9 on
    # top of 1. Wider curves keep Plotly's ticks, one per decade or fewer.
    losses = np.concatenate([dynamics.float32_loss, dynamics.mixed_loss, dynamics.pure_loss])
    losses = losses[np.isfinite(losses) & (losses > 0)]
    narrow = losses.size and np.log10(losses.max() / losses.min()) < 3
    layout["yaxis"].update(type="log", tickformat=LOG_FORMAT, **({"dtick": "D2"} if narrow else {}))
    return {"data": data, "layout": layout}


# What "lost" means for the pure run under each rounding (see DynamicsReport).
LOST_MEANING = {
    "nearest": "updates rounded away (p + delta == p)",
    "stochastic": "updates that rounded back to p this step (kept only on average)",
    "kahan": "updates that left no trace in p nor in the compensation buffer",
}


def lost_update_figure(dynamics: DynamicsReport) -> Figure:
    """Share of parameter entries whose update was rounded away, per step, pure vs masters.

    The y axis is fitted to the shares, not fixed at 0-100%: shares are often below 1%, which a
    0-100% axis draws as a flat line on the floor. It runs from a little below 0 (so a run that
    loses nothing draws its line above the x axis, not hidden on it) to a little above the
    largest share; 0-1% when nothing is lost.
    """
    dtype = dynamics.config.compute_dtype
    picked = subsample(dynamics.steps)
    x = (picked + 1).tolist()  # step k's update is the (k+1)-th: it lines up with the loss after it
    hover = "step %{x}: %{y:.3g}% of entries<extra>"
    pure = f"pure {dtype} ({ROUNDING_NAMES[dynamics.pure_rounding]})"
    data = [
        line_trace(x, 100 * dynamics.pure_lost_share[picked], pure, OVERFLOW_COLOR)
        | {"hovertemplate": hover + f"{pure}</extra>"},
        line_trace(x, 100 * dynamics.mixed_lost_share[picked], "float32 masters", MIXED_COLOR)
        | {"hovertemplate": hover + "float32 masters</extra>"},
    ]
    curves = [dynamics.pure_lost_share, dynamics.mixed_lost_share]
    if recipe(dtype).saturates:
        # float8: the share of the mixed run's quantized entries that saturated at the format's
        # largest value (delayed scaling clips the step after an amax jump).
        saturated = 100 * dynamics.mixed_saturated_share[picked]
        name = f"{dtype} entries saturated (mixed run)"
        data.append(
            line_trace(x, saturated, name, FLOAT32_COLOR)
            | {"hovertemplate": "step %{x}: %{y:.3g}% saturated<extra></extra>"}
        )
        curves.append(dynamics.mixed_saturated_share)
    lost = LOST_MEANING[dynamics.pure_rounding]
    layout = base_layout(
        f"Lost-update meter<br><sup>{lost}</sup>",
        "step",
        "share of entries",
    )
    shares = 100 * np.concatenate(curves)
    shares = shares[np.isfinite(shares)]
    top = float(shares.max()) if shares.size and shares.max() > 0 else 1.0
    layout["yaxis"].update(range=[-0.05 * top, 1.08 * top], ticksuffix="%")
    return {"data": data, "layout": layout}


def scale_figure(dynamics: DynamicsReport) -> Figure:
    """The loss scale over the steps (log2), skipped steps marked with crosses."""
    picked = subsample(dynamics.steps)
    x = (picked + 1).tolist()  # the scale step k used, at the step it produced
    skipped = np.flatnonzero(dynamics.mixed_skipped)[:MAX_POINTS]
    data = [
        line_trace(
            x,
            np.log2(dynamics.mixed_scale[picked]),
            "log2 loss scale",
            MIXED_COLOR,
            line={"color": MIXED_COLOR, "width": 2, "shape": "hv"},
        ),  # fmt: skip
        {
            "type": "scatter",
            "mode": "markers",
            "x": (skipped + 1).tolist(),
            "y": np.log2(dynamics.mixed_scale[skipped]).tolist(),
            "name": f"skipped update ({int(dynamics.mixed_skipped.sum())})",
            "marker": {"symbol": "x", "size": 9, "color": OVERFLOW_COLOR},
            "hovertemplate": "step %{x} skipped at S = 2^%{y}<extra></extra>",
        },
    ]
    title = f"Loss scale over the steps ({dynamics.mode} scaling, mixed run)"
    layout = base_layout(title, "step", "log2 S")
    layout["showlegend"] = True  # keep the skipped-update entry visible even when it is empty
    return {"data": data, "layout": layout}


DYNAMICS_FIGURES = (dynamics_loss_figure, lost_update_figure, scale_figure)
