"""A training run as the charts draw it: its settings as text and its curves, nothing more.

Rule: ``curves_of(dynamics)`` keeps, from a finished run, only what the three charts draw (the
loss curves, the mixed run's scale and skips, the lost and saturated shares) and every setting
the run was computed with, written as the page writes it (``loss_scale=32768``, ``lr=0.1``,
``data=synthetic``). A pinned run is one of these: no summary, no files, no report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from playground.core.recipes.registry import recipe
from playground.core.runs.train import DynamicsReport

SYNTHETIC = "synthetic"


def value_text(value: Any) -> str:
    """A setting's value as the page writes it: whole floats without a point (32768), other
    floats in their shortest exact form (0.1), everything else as is."""
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e16:
            return str(int(value))
        return repr(value)
    return str(value)


def settings_text(values: Mapping[str, Any], data_name: str | None) -> dict[str, str]:
    """Every setting of ``values`` as text, then ``data``: the uploaded file's name or
    ``synthetic``."""
    return {name: value_text(value) for name, value in values.items()} | {
        "data": data_name or SYNTHETIC
    }


def _frozen(values: np.ndarray, dtype: type = np.float64) -> np.ndarray:
    copy = np.array(values, dtype=dtype)
    copy.flags.writeable = False
    return copy


@dataclass(frozen=True, eq=False)
class RunCurves:
    """One run's curves (read-only float64 arrays; see ``DynamicsReport`` for each) and the
    settings it was computed with (``settings``: field -> text, and ``data``)."""

    settings: Mapping[str, str]
    compute_dtype: str
    saturates: bool  # the recipe clips at its largest value (float8): the meter shows it
    steps: int
    mode: str
    pure_rounding: str
    float32_loss: np.ndarray
    mixed_loss: np.ndarray
    pure_loss: np.ndarray
    mixed_scale: np.ndarray
    pure_scale: np.ndarray
    mixed_skipped: np.ndarray
    mixed_lost_share: np.ndarray
    pure_lost_share: np.ndarray
    mixed_saturated_share: np.ndarray
    # Updates that were zero because their gradient underflowed (DynamicsReport's meter).
    mixed_flushed_share: np.ndarray
    pure_flushed_share: np.ndarray

    def loss(self, run: str) -> np.ndarray:
        """The loss curve of ``run`` (``float32``, ``mixed`` or ``pure``)."""
        return getattr(self, f"{run}_loss")

    def lost_share(self, run: str) -> np.ndarray:
        """The lost-update share per step of ``run`` (``mixed`` or ``pure``)."""
        return getattr(self, f"{run}_lost_share")

    def flushed_share(self, run: str) -> np.ndarray:
        """The share per step of ``run``'s updates lost to a gradient that underflowed."""
        return getattr(self, f"{run}_flushed_share")

    def scale(self, run: str) -> np.ndarray:
        """The loss scale each step of ``run`` (``mixed`` or ``pure``) used."""
        return getattr(self, f"{run}_scale")


def curves_of(dynamics: DynamicsReport, data_name: str | None = None) -> RunCurves:
    """The curves of a finished run and its settings (``data_name``: the uploaded file's)."""
    config = dynamics.config
    saturated = dynamics.mixed_saturated_share
    return RunCurves(
        settings=settings_text(config.to_dict(), data_name),
        compute_dtype=config.compute_dtype,
        saturates=recipe(config.compute_dtype).saturates,
        steps=dynamics.steps,
        mode=dynamics.mode,
        pure_rounding=dynamics.pure_rounding,
        float32_loss=_frozen(dynamics.float32_loss),
        mixed_loss=_frozen(dynamics.mixed_loss),
        pure_loss=_frozen(dynamics.pure_loss),
        mixed_scale=_frozen(dynamics.mixed_scale),
        pure_scale=_frozen(dynamics.pure_scale),
        mixed_skipped=_frozen(dynamics.mixed_skipped, bool),
        mixed_lost_share=_frozen(dynamics.mixed_lost_share),
        pure_lost_share=_frozen(dynamics.pure_lost_share),
        mixed_saturated_share=_frozen(np.zeros(dynamics.steps) if saturated is None else saturated),
        mixed_flushed_share=_frozen(_or_zeros(dynamics.mixed_flushed_share, dynamics.steps)),
        pure_flushed_share=_frozen(_or_zeros(dynamics.pure_flushed_share, dynamics.steps)),
    )


def _or_zeros(share: np.ndarray | None, steps: int) -> np.ndarray:
    return np.zeros(steps) if share is None else share


def as_curves(run: DynamicsReport | RunCurves) -> RunCurves:
    """``run`` as RunCurves (a DynamicsReport is converted, with synthetic data named)."""
    return run if isinstance(run, RunCurves) else curves_of(run)
