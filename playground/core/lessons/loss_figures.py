"""How a training run's losses, and the ratio of two of them, are written: in every lesson
caption, condition and training reading alike, by these functions alone.

Rule: a run's loss has *stopped moving* when, over the last tenth of its steps (at least one
step), it changed by less than 1% of its final value (largest minus smallest): float32 at its
noise floor, or a float16 run stalled because its gradients flush. Its final value is then
set by rounding noise, and XLA's CPU code on another processor (another vector width, thread
count or fast-math setting sums in another order) leaves it a few parts in 10^4 away
(``bench/figure_stability.py`` measures it). So

    a loss that stopped moving      2 significant digits after "about": about 2.3e-12
    a ratio with one such loss      likewise: about 3.2e+04 x
    any other loss or ratio         4 significant digits: 0.7448, 1.001 x
    a share of a stopped run's      whole percents: 40% (its entries hover at the flush or
    updates                         rounding threshold, and another processor counts a few
                                    others: 40.3% or 40.4%, 0.0% or 0.005%)
    any other share                 to 0.1%: 0.5%

A run's path is its first loss (never stopped: it is where the run starts) and its final one.
"""

from __future__ import annotations

import numpy as np

# A loss that moved less than this share of its final value over the last tenth of the run
# has stopped moving.
STOPPED_SHARE = 0.01
# Significant digits of a loss that stopped moving (the digits that agree across XLA's
# CPU variations, with a margin) and of any other.
NOISE_DIGITS = 2
DIGITS = 4


def stopped(curve: np.ndarray) -> bool:
    """Whether the loss ``curve`` (initial, then after each step) has stopped moving."""
    curve = np.asarray(curve, np.float64)
    tail = curve[-(max(curve.size // 10, 1) + 1) :]
    if not np.isfinite(tail).all() or tail[-1] == 0:
        return False
    return bool(tail.max() - tail.min() < STOPPED_SHARE * abs(tail[-1]))


def _figure(value: float, noisy: bool) -> str:
    return f"about {value:#.{NOISE_DIGITS}g}" if noisy else f"{value:.{DIGITS}g}"


def final_loss(curve: np.ndarray) -> str:
    """The run's final loss as written (see the rule)."""
    return _figure(float(curve[-1]), stopped(curve))


def loss_path(curve: np.ndarray) -> str:
    """``first -> final``, each as written."""
    return f"{float(curve[0]):.{DIGITS}g} -> {final_loss(curve)}"


def loss_ratio(curve: np.ndarray, reference: np.ndarray) -> str:
    """The final loss of ``curve`` over ``reference``'s, as ``<ratio> x``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = float(np.float64(curve[-1]) / np.float64(reference[-1]))
    return _figure(ratio, stopped(curve) or stopped(reference)) + " x"


def update_share(share: float, curve: np.ndarray) -> str:
    """A share of the updates of the run whose loss is ``curve``, as written."""
    return f"{share:.0%}" if stopped(curve) else f"{share:.1%}"
