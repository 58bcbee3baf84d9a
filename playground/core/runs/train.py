"""Training dynamics: K steps of three runs on one batch, as one compiled ``lax.scan``.

The three runs start from the same float32 initialization (the registry's model, from the
model seed) and use the registry's optimizer. Every step of each is the one mixed-precision
rule, ``core.step.step.step_trace``, with the run's options; each run carries its parameters,
optimizer state, loss-scale policy, rounding state and amax history from step to step:

    float32  the float32 twin (``float32_twin``): every array float32, no loss scale
    mixed    the exercise's step repeated: float32 master parameters; each step rounds a copy
             to the compute dtype, differentiates the scaled loss, unscales in float32, updates
             the masters
    pure     the parameters themselves are stored in the compute dtype (no float32 copy), and so
             are the gradients and the optimizer's state; each step's p + update is rounded
             back into that dtype by the ``pure_rounding`` rule of ``core.formats.rounding``
             (the step's ``Rounding``): nearest (a plain cast), stochastic (random bits from
             the model seed and the step index, so a config always draws the same), or kahan
             (a compensation buffer in the compute dtype, carried from step to step)

Loss scaling (mixed and pure runs) is a policy of ``playground.core.step.loss_scale`` chosen by the
``mode`` setting (none, static, dynamic); each run carries its own policy state, and a policy
that skips non-finite steps does it with ``optax.apply_if_finite``.

Both low-precision runs compute by the precision ``Policy`` of the config (its recipe,
``playground.core.step.policy``), and the pure run stores its parameters in the recipe's forward
format. A quantizing recipe (float8, ``core.recipes.float8``) has each run carry its own amax
history from step to step (``amax_history`` steps long), so delayed scaling scales step k by the
amax values of the steps before it (the first step by 1). The mixed run keeps float32 masters.
The float8 pure run stores its parameters in float8_e4m3fn, and only those: it is
differentiated at their float32 values (JAX's own derivative of the cast would round the
gradient to E4M3), so its gradients, updates and optimizer state are float32, and each
p + update is rounded back into E4M3 by its ``pure_rounding`` (a plain cast for nearest: a
weight pushed past 448 would become NaN, as E4M3FN has no inf; Kahan's compensation buffer is
E4M3 too).

Recorded: the float32 MSE of each run's parameters before the first update and after every
update (K + 1 values for K steps), so the three curves compare models rather than loss
rounding; and per step k = 0 .. K-1, the scale that step used, whether its update was skipped,
and, for the mixed and pure runs, the share of parameter entries whose update was lost, split
into updates rounded away and updates that were zero because their gradient underflowed (see
``DynamicsReport``) and, under float8, the share of quantized entries that saturated. A skipped
step leaves every stored array, Kahan's buffer too, as it was (the amax history still records
the step, as TransformerEngine's does).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.core.data.user_data import UserData, fitted
from playground.core.formats import metrics, rounding
from playground.core.frozen import freeze
from playground.core.model.models import initial_state, param_arrays, rebuilt
from playground.core.model.optimizers import build_optimizer, float32_state
from playground.core.recipes.float8 import STATS, AmaxHistory, matmul_layers
from playground.core.settings.settings import StepConfig, check_setting
from playground.core.step.compiled import program, run_compiled
from playground.core.step.loss_scale import LossScale, NoOpLossScale, make_loss_scale
from playground.core.step.policy import Policy, policy_for
from playground.core.step.step import (
    NEAREST,
    Rounding,
    StepTrace,
    float32_twin,
    low_precision_loss,
    step_optimizer,
    step_trace,
    widened,
)


@dataclass(frozen=True)
class DynamicsReport:
    """Curves of the three runs (read-only numpy arrays).

    float32_loss, mixed_loss, pure_loss (length steps + 1): float32 MSE of each run's
      parameters after 0, 1, ..., steps updates; the last is the loss after the last step.
    The rest have length ``steps``, entry k for step k (the (k+1)-th update):
    mixed_scale, pure_scale: the loss scale each run used at that step.
    mixed_skipped, pure_skipped: True where the dynamic rule skipped that run's update.
    mixed_lost_share, pure_lost_share: share of all parameter entries whose update was lost:
      nonzero, yet it left no trace in what the run stores for the entry. Under nearest and
      stochastic rounding the run stores only p, so lost = p + update stored as p, unchanged
      (for nearest the update was under half the gap, gone for good; for stochastic the draw
      rounded down, and since no remainder is kept this step's update is gone too, made up
      only on average by the draws that jump a whole gap). Under Kahan the run stores p and
      its compensation c, so lost = both unchanged: the update neither moved p nor was kept
      in c (it happens only when c dwarfs it); an update waiting in c is not lost.
    mixed_flushed_share, pure_flushed_share: share of all parameter entries whose update was
      zero because their gradient underflowed: the run's gradient is 0 where float32's gradient
      at the same parameters is not (lost before the optimizer; never counted in
      ``*_lost_share``, whose updates are nonzero). At S = 1 with tiny gradients in float16
      this is where the updates go: none is left to be rounded away.
    pure_rounding: the pure run's rounding (``nearest``, ``stochastic``, ``kahan``).
    synthetic: whether the runs trained on the synthetic teacher's batch (not a user's data).
    mixed_saturated_share, pure_saturated_share (float8 only; zeros otherwise): per step, the
      share of the entries that step cast to float8 (every matmul's input and weights forward,
      its arriving gradient backward) that saturated: a plain cast would have overflowed them
      (beyond the format's range once scaled), so they were clipped to its largest value.
      Under delayed scaling a tensor whose amax jumps past its history saturates for one step,
      until the history has seen the new amax.
    """

    config: StepConfig
    steps: int
    mode: str
    period: int
    float32_loss: np.ndarray
    mixed_loss: np.ndarray
    pure_loss: np.ndarray
    mixed_scale: np.ndarray
    pure_scale: np.ndarray
    mixed_skipped: np.ndarray
    pure_skipped: np.ndarray
    mixed_lost_share: np.ndarray
    pure_lost_share: np.ndarray
    pure_rounding: str = "nearest"
    mixed_saturated_share: np.ndarray | None = None
    pure_saturated_share: np.ndarray | None = None
    mixed_flushed_share: np.ndarray | None = None
    pure_flushed_share: np.ndarray | None = None
    synthetic: bool = True

    @property
    def mixed_applied(self) -> int:
        """Updates the mixed run applied (steps minus skips)."""
        return int(self.steps - self.mixed_skipped.sum())


_ROUNDING_STREAM = 0x73726E64  # "srnd": keeps the rounding bits apart from nnx.Rngs' streams


class _Run(NamedTuple):
    """What a low-precision run carries from step to step."""

    params: nnx.State
    opt_state: optax.OptState
    loss_scale: LossScale
    rounding_state: Any
    float8_history: AmaxHistory | None


def capacity(steps: int) -> int:
    """The compiled run's buffer length: the power of two at or above ``steps``.

    The run length itself is traced, so one program serves every length of a bucket and at
    most log2(MAX_STEPS) + 1 programs exist per (shapes, dtype, mode) instead of one per length.
    """
    return 1 << (steps - 1).bit_length()


def _share(masks) -> jax.Array:
    """Share of all entries of the tree ``masks`` that are True."""
    size = sum(leaf.size for leaf in jax.tree.leaves(masks))
    return sum(jax.tree.leaves(jax.tree.map(jnp.sum, masks))) / size


def _lost_share(trace: StepTrace, rounding_before: Any) -> jax.Array:
    """Share of all parameter entries whose nonzero update left the stored value unchanged
    (and, for a rounding with a state, that state as well)."""
    lost = jax.tree.map(
        metrics.lost_update_mask, trace.params_before, trace.params_after, trace.updates
    )
    kept = rounding.unchanged(rounding_before, trace.rounding_state)
    if kept is not None:
        lost = jax.tree.map(jnp.logical_and, lost, param_arrays(kept))
    return _share(lost)


def _flushed_share(trace: StepTrace, reference_grads) -> jax.Array:
    """Share of all parameter entries whose update was zero because their gradient underflowed
    (zero where ``reference_grads()``, float32's gradient at the same parameters, is not),
    computed only in a step that has a zero gradient entry (none: nothing was flushed)."""

    def share(_) -> jax.Array:
        masks = jax.tree.map(
            metrics.flushed_update_mask, trace.grads, reference_grads(), trace.updates
        )
        return _share(masks).astype(jnp.float32)

    has_zero = jnp.any(jnp.stack([jnp.any(g == 0) for g in jax.tree.leaves(trace.grads)]))
    return jax.lax.cond(has_zero, share, lambda _: jnp.float32(0), None)


def _saturated_share(trace: StepTrace) -> jax.Array:
    """Share of the entries the step cast to float8 that saturated (0 without float8)."""
    if trace.float8_stats is None:
        return jnp.float32(0)
    totals = trace.float8_stats.sum(axis=(0, 1))
    return totals[STATS.index("saturated")] / totals[STATS.index("size")]


# pure_rounding is static: one program per rounding, so 'nearest' compiles exactly as before
# (no compensation buffer or random bits carried along) and each mode does only its own work.
_STATIC = (
    "capacity",
    "mode",
    "precision",
    "model",
    "optimizer",
    "pure_rounding",
)


@program(static_argnames=_STATIC)
def _three_runs(
    model_seed,
    x,
    y,
    lr,
    loss_scale,
    period,
    steps,
    amax_history,
    initial,
    *,
    capacity,
    mode,
    precision: Policy,
    model,
    optimizer,
    pure_rounding="nearest",
):
    """The three runs for a traced number of ``steps`` (at most ``capacity``), see the rule.

    Each step of each run is ``core.step.step.step_trace``: the float32 run's by the float32
    twin's policy, without a loss scale; the mixed run's on its masters, the pure run's on its
    stored parameters with its rounding. Returns per-step buffers of length ``capacity`` and
    loss buffers of length capacity + 1; entries past ``steps`` (past steps + 1 for losses) are
    unused zeros.
    """
    # Initial parameters from their own program (models.initial_state), so that a new batch size
    # does not compile the initializers' random draws into its run again.
    network = rebuilt(model, x.shape[-1], y.shape[-1], initial)
    # Only Param state moves into the carried arrays; the graph definition stays in `graphdef`.
    graphdef, master = nnx.split(network, nnx.Param)
    twin = float32_twin(precision)
    # The pure run stores its parameters in the recipe's forward format (float8: E4M3).
    pure = jax.tree.map(precision.without_masters().cast_to_param, master)
    history = None
    if precision.compute.quantizes:
        history = AmaxHistory.fresh(len(matmul_layers(network)), amax_history)
    tx = build_optimizer(optimizer, lr)
    # The float32 twin keeps its optimizer's state in float32, whatever moments_dtype says.
    float32_tx = build_optimizer(float32_state(optimizer), lr)
    start = make_loss_scale(mode, loss_scale, period)

    def float32_loss(params) -> jax.Array:
        """The float32 twin's loss of ``params`` (stored in any dtype: its casts read them as
        float32)."""
        return low_precision_loss(nnx.merge(graphdef, params), x, y, twin)

    def float32_grads(params) -> dict[str, jax.Array]:
        """float32's gradient at ``params``, differentiated at their float32 values."""
        point = jax.tree.map(lambda param: param.astype(jnp.float32), params)
        return param_arrays(jax.grad(float32_loss)(point))

    # The stochastic run's random bits: a stream of the model seed apart from the init's,
    # folded with the step index in the loop.
    rounding_key = jax.random.fold_in(jax.random.key(model_seed), _ROUNDING_STREAM)

    def started(
        params, loss_scale: LossScale, rounding_state=None, history=None, optimizer=tx
    ) -> _Run:
        """A run from ``params`` as stored: its optimizer's state at their point."""
        opt_state = step_optimizer(optimizer, loss_scale).init(jax.tree.map(widened, params))
        return _Run(params, opt_state, loss_scale, rounding_state, history)

    def advanced(
        run: _Run, policy: Policy, storing: Rounding, optimizer=tx
    ) -> tuple[StepTrace, _Run]:
        """One step of ``run`` by the rule (``optimizer``: the runs' own, or the twin's), and
        the run as its next step finds it."""
        model = nnx.merge(graphdef, run.params)
        trace = step_trace(
            model,
            optimizer,
            x,
            y,
            run.loss_scale,
            policy,
            opt_state=run.opt_state,
            rounding=storing,
            float8_history=run.float8_history,
            new_loss=False,
        )
        after = _Run(
            nnx.state(model, nnx.Param),
            trace.opt_state,
            run.loss_scale.adjust(trace.finite),
            trace.rounding_state,
            trace.float8_history,
        )
        return trace, after

    def one_step(carry, index):
        float32_run, runs = carry
        trace, float32_run = advanced(float32_run, twin, NEAREST, float32_tx)
        outputs = {"float32_loss": trace.initial_loss[0]}
        new_runs = {}
        for name, run in runs.items():
            outputs[f"{name}_loss"] = float32_loss(run.params)
            outputs[f"{name}_scale"] = run.loss_scale.loss_scale
            storing = NEAREST
            if name == "pure":
                key = jax.random.fold_in(rounding_key, index)
                storing = Rounding(pure_rounding, run.rounding_state, key)
            trace, new_runs[name] = advanced(run, precision, storing)
            outputs[f"{name}_skipped"] = trace.skipped
            outputs[f"{name}_lost_share"] = _lost_share(trace, run.rounding_state)
            outputs[f"{name}_flushed_share"] = _flushed_share(
                trace, functools.partial(float32_grads, run.params)
            )
            outputs[f"{name}_saturated_share"] = _saturated_share(trace)
        return (float32_run, new_runs), outputs

    def body(index, state):
        carry, buffers = state
        carry, outputs = one_step(carry, index)
        return carry, {k: buffers[k].at[index].set(v) for k, v in outputs.items()}

    runs = {
        "mixed": started(master, start, history=history),
        "pure": started(pure, start, rounding.init_state(pure_rounding, pure), history),
    }
    carry = (started(master, NoOpLossScale(), optimizer=float32_tx), runs)
    shapes = jax.eval_shape(lambda c: one_step(c, 0)[1], carry)
    buffers = {
        k: jnp.zeros(capacity + k.endswith("_loss"), shape.dtype) for k, shape in shapes.items()
    }
    (float32_run, runs), buffers = jax.lax.fori_loop(0, steps, body, (carry, buffers))
    # The loss after the last update closes each curve: K + 1 points for K steps.
    finals = {"float32": float32_run} | runs
    for name, run in finals.items():
        key = f"{name}_loss"
        buffers[key] = buffers[key].at[steps].set(float32_loss(run.params))
    return buffers


def _shapes(config: StepConfig) -> dict:
    return {"choice": config.model_choice, "d_in": config.d_in, "d_out": config.d_out}


def run_dynamics(
    config: StepConfig,
    steps: int | None = None,
    mode: str | None = None,
    period: int | None = None,
    data: UserData | None = None,
    pure_rounding: str | None = None,
) -> DynamicsReport:
    """Train the three runs with ``config``'s data, lr, loss scale, dtype and run settings.

    Args:
      config: a validated StepConfig; its ``steps``, ``mode``, ``period`` and
        ``pure_rounding`` are used unless given here (each checked against the settings
        table, and steps against the work cap).
      steps: the number of updates K of each run.
      mode: the loss-scale policy of the mixed and pure runs: none, static or dynamic.
      period: the dynamic policy's growth interval, in finite steps.
      data: a user's own batch (an uploaded CSV), used instead of the synthetic one.
      pure_rounding: how the pure run stores p + update: nearest, stochastic or kahan.

    Returns:
      A DynamicsReport. One compiled program per (shapes, precision policy, mode,
      capacity(steps), pure_rounding).

    Raises:
      ConfigError: naming the bad setting.
    """
    given = {"steps": steps, "mode": mode, "period": period, "pure_rounding": pure_rounding}
    config = config.replace(
        **{name: check_setting(name, value) for name, value in given.items() if value is not None}
    )
    config, batch = fitted(config, data)
    config.check_run()
    buffers = run_compiled(
        _three_runs,
        config,
        np.int32(config.period),
        np.int32(config.steps),
        np.int32(config.amax_history),
        initial_state(np.uint32(config.model_seed), **_shapes(config)),
        batch=batch,
        capacity=capacity(config.steps),
        mode=config.mode,
        precision=policy_for(config),
        model=config.model_choice,
        optimizer=config.optimizer_choice,
        pure_rounding=config.pure_rounding,
    )
    curves = {
        name: freeze(values[: config.steps + name.endswith("_loss")])
        for name, values in buffers.items()
    }
    return DynamicsReport(
        synthetic=data is None,
        config=config,
        steps=config.steps,
        mode=config.mode,
        period=config.period,
        pure_rounding=config.pure_rounding,
        **curves,
    )
