"""The frozen results of one step report: per parameter, per hidden activation, and the whole.

Rule: these hold read-only numpy arrays and Python numbers only (no JAX state), built by
``playground.core.step.report.run_report``; views read them and never compute numerics beyond
cheap summaries (medians, the magnitude counts) that are computed once, on first use.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from playground.core.formats import metrics
from playground.core.recipes.block_places import block_magnitude_counts, block_units
from playground.core.recipes.block_report import BlockReport
from playground.core.recipes.float8_report import Float8Tensor
from playground.core.recipes.registry import recipe
from playground.core.settings.settings import StepConfig
from playground.core.step.operations_report import OperationReport, first_nonfinite


@dataclass(frozen=True)
class ParamReport:
    """One parameter of both paths, as read-only numpy float32 arrays of the parameter's shape.

    Arrays:
      before: the float32 master values before the step (both paths start here).
      mixed_after, float32_after: the values after the mixed step and after the float32 twin.
      scaled_grads: gradients of S * loss from the low-precision backward pass (each value is
        exactly representable in the compute dtype; inf where it overflowed).
      mixed_grads: scaled_grads / S in float32, the optimizer's input.
      float32_grads: the float32 twin's gradients.
      updates: what the mixed step's optimizer added to the parameter (before rounding).
      rel_error: |mixed_grads - float32_grads| / |float32_grads|; NaN where float32_grads == 0.
      update_ratio: |updates| / RMS(before), each update against its tensor's typical size (the
        RMS of all the model's parameters for a tensor that is all zero, such as a fresh bias),
        so finite inputs give finite ratios.

    Statistics:
      norm_rel_error: ||mixed_grads - float32_grads|| / ||float32_grads|| in float64, by
        ``metrics.norm_ratio`` (0 when both are 0,
        inf when only the baseline is 0; inf or NaN when a gradient entry is not finite).
      median_rel_error, max_rel_error: over the entries where rel_error is defined (NaN if none).
      underflow_count: entries that are 0 in mixed_grads but not in float32_grads.
      nonfinite_scaled_count, nonfinite_count: inf or NaN entries in scaled_grads, mixed_grads.
      lost_update_count: entries with a nonzero update whose value did not change, because the
        update was at most half the float32 spacing at that parameter.
      median_update_ratio: median of update_ratio over its defined entries.
    """

    name: str
    before: np.ndarray
    mixed_after: np.ndarray
    float32_after: np.ndarray
    scaled_grads: np.ndarray
    mixed_grads: np.ndarray
    float32_grads: np.ndarray
    updates: np.ndarray
    rel_error: np.ndarray
    update_ratio: np.ndarray
    norm_rel_error: float
    max_rel_error: float
    underflow_count: int
    nonfinite_scaled_count: int
    nonfinite_count: int
    lost_update_count: int

    @property
    def size(self) -> int:
        """Number of entries."""
        return int(self.before.size)

    # Medians are computed on first use with numpy's O(n) selection: XLA's CPU sort made them
    # the most expensive part of the compiled report.
    @functools.cached_property
    def median_rel_error(self) -> float:
        return _nanmedian(self.rel_error)

    @functools.cached_property
    def median_update_ratio(self) -> float:
        return _nanmedian(self.update_ratio)


def _nanmedian(values: np.ndarray) -> float:
    """Median of the non-NaN entries; NaN when there are none."""
    defined = values[~np.isnan(values)]
    return float(np.median(defined)) if defined.size else float("nan")


# The log2 binades the activation-gradient histograms count, from below float32's smallest
# subnormal (2^-149) to past its largest value (2^128): every finite nonzero value has a bin.
LOG2_LOW, LOG2_HIGH = -150, 128


@dataclass(frozen=True)
class ActivationReport:
    """The gradient of ``S * loss`` with respect to one hidden activation, in the compute dtype.

    zero_share: share of its entries that are exactly zero (before unscaling). log2_counts[i]:
    entries with floor(log2 |g|) == LOG2_LOW + i (finite, nonzero). zero_count, nonfinite_count,
    size: entries that are zero, that are inf or NaN, and in all.
    """

    layer: int
    zero_count: int
    nonfinite_count: int
    size: int
    log2_counts: np.ndarray

    @property
    def zero_share(self) -> float:
        return self.zero_count / self.size


@dataclass(frozen=True)
class StepReport:
    """One run: the config, the four losses and a ParamReport per parameter (path name order).

    Losses are Python floats: ``mixed_new_loss`` is exactly what ``mixed_precision_step``
    returns for this data (bfloat16 compute), ``*_initial_loss`` are the unscaled losses
    before the step, ``float32_*`` those of the float32 twin. ``float8`` (a quantizing recipe,
    float8, only): every quantized tensor of the mixed step, three per matmul.
    ``mixed_initial_loss_in_compute_dtype``, ``mixed_initial_loss_in_float32``: the loss of
    the mixed step's initial outputs computed in the compute dtype and in float32 (one of them
    is ``mixed_initial_loss``, as the precision policy chose). ``operations``: each operation
    of the mixed step, its dtype and its finiteness (``core.step.operations_report``). ``blocks``
    (a block-scaled recipe only): its first layer's operands (``core.recipes.block_report``).
    """

    config: StepConfig
    mixed_initial_loss: float
    mixed_new_loss: float
    float32_initial_loss: float
    float32_new_loss: float
    params: dict[str, ParamReport]
    activations: tuple[ActivationReport, ...] = ()
    float8: tuple[Float8Tensor, ...] = ()
    mixed_initial_loss_in_compute_dtype: float = float("nan")
    mixed_initial_loss_in_float32: float = float("nan")
    operations: tuple[OperationReport, ...] = ()
    blocks: BlockReport | None = None

    @property
    def first_nonfinite(self) -> dict[str, str | None]:
        """The operation where inf or NaN first appeared, forward and backward (or None)."""
        return first_nonfinite(self.operations)

    @functools.cached_property
    def magnitudes(self) -> dict[str, dict[str, int]]:
        """``metrics.magnitude_counts`` of all parameters' gradients together, in the gradient
        format of the compute recipe (float8: E5M2, the format of the gradient that flows back
        into each matmul); for a block recipe, where its block scales place them
        (``core.recipes.block_places``: lost to zero, subnormal, saturated, non-finite)."""
        every = self.params.values()
        compute = recipe(self.config.compute_dtype)
        if compute.block is not None:
            return block_magnitude_counts(
                [p.float32_grads for p in every], [p.scaled_grads for p in every], compute.block
            )
        return metrics.magnitude_counts(
            np.concatenate([p.float32_grads.ravel() for p in every]),
            np.concatenate([p.scaled_grads.ravel() for p in every]),
            recipe(self.config.compute_dtype).gradient_format,
        )

    @functools.cached_property
    def block_units(self) -> dict[str, np.ndarray] | None:
        """For a block recipe, every gradient entry in its block's units
        (``core.recipes.block_places``), by view: ``scaled`` (the backward pass's scaled
        gradients) and ``float32`` (float32's gradient, at S = 1); None for another recipe."""
        spec = recipe(self.config.compute_dtype).block
        if spec is None:
            return None
        every = list(self.params.values())
        return {
            "scaled": block_units([p.scaled_grads for p in every], spec),
            "float32": block_units([p.float32_grads for p in every], spec),
        }

    @property
    def kernel(self) -> ParamReport:
        return self.params["kernel"]

    @property
    def bias(self) -> ParamReport:
        return self.params["bias"]
