"""The step report: the mixed step, its float32 twin and their comparison, in one compiled call.

Rule::

    x, y      = make_batch(config)
    mixed     = step_trace(model(model_seed), sgd(lr), x, y, StaticLossScale(S), policy_for(config))
    baseline  = step_trace(model(model_seed), sgd(lr), x, y, NoOpLossScale(), float32_twin(policy))
    per parameter p (by path name): statistics of mixed.grads[p] against baseline.grads[p]
    a quantizing recipe (float8) only: per matmul, the statistics of its quantized tensors
    the first layer's output under the config's accumulation (``core.step.accumulation_report``)

The two steps run in ``_both_steps``, jitted with the seed, lr and S traced and the precision
policy static: JAX compiles it once per (shapes, policy). Its outputs come back in one transfer; the
statistics are then computed in numpy on the host and everything is frozen into a StepReport, so
no JAX state leaks into the views.

The results hold read-only numpy arrays and Python numbers only (a ``ParamReport`` per
parameter, an ``ActivationReport`` per hidden activation, the whole a ``StepReport``); views read
them and never compute numerics beyond cheap summaries (medians, the magnitude counts) that are
computed once, on first use.
"""

from __future__ import annotations

import functools
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import jax.numpy as jnp
import numpy as np

from playground.core.data.synthetic import make_batch
from playground.core.data.user_data import UserData, fitted
from playground.core.formats import metrics
from playground.core.frozen import freeze
from playground.core.model.models import (
    ModelChoice,
    initial_state,
    input_kernel,
    param_arrays,
    param_shapes,
    rebuilt,
)
from playground.core.model.op_policy import KINDS
from playground.core.model.optimizers import build_optimizer
from playground.core.recipes.block_places import block_magnitude_counts, block_units
from playground.core.recipes.block_report import BlockReport, measure, report_from
from playground.core.recipes.block_stats import comparison_measure
from playground.core.recipes.float8 import ROLES, STATS
from playground.core.recipes.float8_report import Float8Tensor, float8_tensors
from playground.core.recipes.registry import recipe
from playground.core.settings.settings import StepConfig
from playground.core.step.accumulation_report import AccumulationReport, accumulation_report
from playground.core.step.activation_counts import LOG2_HIGH, LOG2_LOW, activation_counts
from playground.core.step.compiled import program, run_compiled
from playground.core.step.loss_scale import NoOpLossScale, StaticLossScale
from playground.core.step.operations_report import (
    OperationReport,
    first_nonfinite,
    operation_reports,
    step_operations,
)
from playground.core.step.policy import Policy, policy_for
from playground.core.step.step import float32_twin, step_trace

__all__ = [
    "LOG2_HIGH",
    "LOG2_LOW",
    "ActivationReport",
    "ParamReport",
    "StepReport",
    "run_report",
]


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


@dataclass(frozen=True)
class ActivationReport:
    """The gradient of ``S * loss`` with respect to one hidden activation, in the compute dtype.

    zero_share: share of its entries that are exactly zero (before unscaling). log2_counts[i]:
    entries with floor(log2 |g|) == LOG2_LOW + i (finite, nonzero); for a block recipe, of
    each entry in its block's units instead (``core.step.activation_counts``). zero_count,
    nonfinite_count, size: entries that are zero, that are inf or NaN, and in all.
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
    ``accumulation``: the first layer's output error under the matmuls' accumulation
    (``core.step.accumulation_report``).
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
    accumulation: AccumulationReport | None = None

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


# The per-parameter arrays of _both_steps's packed output, in row order.
ROWS = (
    "before",
    "mixed_after",
    "float32_after",
    "scaled_grads",
    "mixed_grads",
    "float32_grads",
    "updates",
)
LOSSES = (
    "mixed_initial_loss",
    "mixed_new_loss",
    "float32_initial_loss",
    "float32_new_loss",
    "mixed_initial_loss_in_compute_dtype",
    "mixed_initial_loss_in_float32",
)


# The first call at a new shape is what a user waits for (a never-used batch size compiles
# this program), so the options trade a little run time for a shorter compile:
#   xla_backend_optimization_level 1  compiles faster than the default level and runs as fast;
#   xla_cpu_use_fusion_emitters off   XLA's older loop emitters: a shorter compile at small
#                                     shapes, slightly slower runs at the largest.
# The exported script compiles its steps with the same options (and takes the parameters as an
# argument too), so it prints the page's two losses bit for bit.
COMPILER_OPTIONS = {"xla_backend_optimization_level": 1, "xla_cpu_use_fusion_emitters": False}


@program(
    static_argnames=("precision", "model", "optimizer", "watch"),
    compiler_options=COMPILER_OPTIONS,
)
def _both_steps(
    model_seed,
    x,
    y,
    lr,
    loss_scale,
    initial,
    *,
    precision: Policy,
    model: ModelChoice,
    optimizer: str,
    watch: int,
):
    """Both steps, packed into six outputs (each output is one transfer).

    Both start from ``initial``, the Params ``models.initial_state`` draws from ``model_seed``
    (compiled apart, so a new batch size compiles only the steps; the seed is not used here).

    Returns the losses (LOSSES order), a (len(ROWS), parameter count) float32 array (one
    row per ROWS entry, each row the parameters flattened in path-name order), the
    activation gradients' counts (``core.step.activation_counts``), the float8 statistics
    (matmuls, roles, STATS), empty unless the recipe quantizes, the mixed step's ``watch``
    operations' flags (2, watch): forward finiteness, backward non-finiteness, and a block
    recipe's comparison row norms (``core.recipes.block_stats.comparison_measure``; else (3, 0)).
    """
    d_in, d_out = x.shape[-1], y.shape[-1]

    def trace(scaling, policy, hidden=(), watch=0):
        network = rebuilt(model, d_in, d_out, initial)
        tx = build_optimizer(optimizer, lr)
        return step_trace(network, tx, x, y, scaling, policy, hidden=hidden, watch=watch)

    hidden = model.hidden_widths
    mixed = trace(StaticLossScale(loss_scale), precision, hidden, watch)
    # The twin computes the task's loss in float32 throughout (its every operation is float32).
    baseline = trace(NoOpLossScale(), float32_twin(precision))
    losses = jnp.concatenate(
        [
            mixed.initial_loss,
            mixed.new_loss,
            baseline.initial_loss,
            baseline.new_loss,
            mixed.loss_in_compute_dtype,
            mixed.loss_in_float32,
        ]
    )
    rows = (
        mixed.params_before,
        mixed.params_after,
        baseline.params_after,
        mixed.scaled_grads,
        mixed.grads,
        baseline.grads,
        mixed.updates,
    )
    flat = jnp.stack([jnp.concatenate([leaf.ravel() for leaf in row.values()]) for row in rows])
    float8 = mixed.float8_stats
    if float8 is None:
        float8 = jnp.zeros((0, len(ROLES), len(STATS)), jnp.float32)
    flags = jnp.stack([mixed.forward_finite.astype(jnp.float32), mixed.backward_nonfinite])
    # A block recipe's comparison of the first products: XLA shares the step's own two.
    norms = jnp.zeros((3, 0), jnp.float32)
    if precision.compute.block is not None:
        first = param_arrays(initial)[input_kernel(model)]
        norms = comparison_measure(x, first, precision.compute.block)
    counts = activation_counts(mixed.activation_grads, precision.compute.block)
    return losses, flat, counts, float8, flags, norms


def _kernels(shapes: dict[str, tuple[int, ...]]) -> list[str]:
    """The matmuls' kernels among the parameters, in path-name order (the first layer's first)."""
    return [name for name in shapes if name.endswith("kernel")]


def _param_reports(flat: np.ndarray, shapes: dict[str, tuple[int, ...]]) -> dict[str, ParamReport]:
    """A ParamReport per parameter from _both_steps's flat rows; statistics as documented.

    The statistics run in numpy on the host, for all parameters at once (one numpy call per
    statistic, split by ``reduceat`` at the parameter boundaries): they are O(parameters)
    reductions that cost the same here as in XLA, while computing them in the jitted program
    would lengthen its compilation at every new shape.
    Overflowed gradients make inf and NaN on purpose, so floating-point warnings are silenced.
    """
    sizes = [math.prod(shape) for shape in shapes.values()]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    row = dict(zip(ROWS, flat, strict=True))
    before, updates = row["before"], row["updates"]
    base, mixed = row["float32_grads"], row["mixed_grads"]
    with np.errstate(all="ignore"):
        rel_error = np.abs(mixed - base) / np.abs(base)
        rel_error[base == 0] = np.nan
        squares = np.add.reduceat(before.astype(np.float64) ** 2, starts)
        tensor_rms = np.sqrt(squares / sizes)
        model_rms = np.sqrt(squares.sum() / before.size)
        typical = np.where(tensor_rms > 0, tensor_rms, model_rms)
        update_ratio = (np.abs(updates) / np.repeat(typical, sizes)).astype(np.float32)
        # fmax ignores NaN (undefined entries) and gives NaN only when every entry is NaN.
        max_rel_error = np.fmax.reduceat(rel_error, starts)
        pair = np.stack([base, mixed - base]).astype(np.float64) ** 2
        base_norm, difference_norm = np.sqrt(np.add.reduceat(pair, starts, axis=1))
        norm_rel_error = metrics.norm_ratio(difference_norm, base_norm)
    masks = np.stack(
        [
            metrics.underflow_mask(mixed, base),
            metrics.nonfinite_mask(row["scaled_grads"]),
            metrics.nonfinite_mask(mixed),
            metrics.lost_update_mask(before, row["mixed_after"], updates),
        ]
    )
    counts = np.add.reduceat(masks, starts, axis=1, dtype=np.int64)
    derived = freeze({"rel_error": rel_error, "update_ratio": update_ratio})
    reports = {}
    for index, (name, shape) in enumerate(shapes.items()):
        part = slice(starts[index], starts[index] + sizes[index])
        # Views into the transferred rows and the two derived arrays: nothing is copied.
        arrays = {field: values[part].reshape(shape) for field, values in (row | derived).items()}
        reports[name] = ParamReport(
            name=name,
            **arrays,
            norm_rel_error=float(norm_rel_error[index]),
            max_rel_error=float(max_rel_error[index]),
            underflow_count=int(counts[0, index]),
            nonfinite_scaled_count=int(counts[1, index]),
            nonfinite_count=int(counts[2, index]),
            lost_update_count=int(counts[3, index]),
        )
    return reports


def run_report(config: StepConfig, data: UserData | None = None) -> StepReport:
    """Run the mixed step and its float32 twin for ``config`` and compare them.

    Args:
      config: a validated StepConfig.
      data: a user's own batch (an uploaded CSV), used instead of the synthetic one (N and D_in
        follow it).

    Returns:
      A StepReport of numpy arrays and Python numbers. Overflow and underflow are results, not
      errors: they show up as counts and non-finite values.
    """
    config, batch = fitted(config, data)
    initial = initial_state(
        np.uint32(config.model_seed),
        choice=config.model_choice,
        d_in=config.d_in,
        d_out=config.d_out,
    )
    precision = policy_for(config)
    compute = precision.compute
    operations = step_operations(config.model_choice, config.task)
    # A block recipe's report reads only the batch and the first kernel as the step starts: it
    # is measured beside the step, so that on a first call the two compile on both cores at
    # once; its comparison of the first products is measured in the step's program.
    shapes = param_shapes(config.model_choice, config.d_in, config.d_out)
    kernels = _kernels(shapes)
    first_kernel = param_arrays(initial)[input_kernel(config.model_choice)]
    first = (batch or make_batch(config))[0], first_kernel
    if compute.block is not None:
        pool = ThreadPoolExecutor(1, thread_name_prefix="block-report")
        measured = pool.submit(measure, compute, *first, compare=False)
        pool.shutdown(wait=False)  # its one thread ends with its one task
    losses, flat, activations, float8, flags, norms = run_compiled(
        _both_steps,
        config,
        initial,
        batch=batch,
        precision=precision,
        model=config.model_choice,
        optimizer=config.optimizer,
        watch=len(operations),
    )
    params = _param_reports(flat, shapes)
    dtypes = {kind: precision.op_dtype(kind) for kind in KINDS}
    if precision.compute.quantizes:
        dtypes["matmul"] = f"{precision.compute.forward_format} (scaled)"
    nonfinite = {name: p.nonfinite_scaled_count for name, p in params.items()}
    return StepReport(
        config=config,
        **{field: float(value) for field, value in zip(LOSSES, losses, strict=True)},
        params=params,
        activations=tuple(
            ActivationReport(
                layer=layer,
                zero_count=int(counts[-2]),
                nonfinite_count=int(counts[-1]),
                size=config.n * config.model_choice.hidden_widths[layer],
                log2_counts=counts[:-2],
            )
            for layer, counts in enumerate(activations)
        ),
        float8=float8_tensors(
            float8, kernels, (*[compute.forward_format] * 2, compute.gradient_format)
        )
        if len(float8)
        else (),
        operations=operation_reports(operations, dtypes, flags, nonfinite),
        blocks=report_from(compute, measured.result(), norms) if compute.block else None,
        accumulation=accumulation_report(config, *first, precision.op_dtype("matmul")),
    )
