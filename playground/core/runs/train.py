"""Training dynamics: K steps of three runs on one batch, as one compiled ``lax.scan``.

The three runs start from the same float32 initialization (the registry's model, from the
model seed) and use the registry's optimizer:

    float32  every array float32, no loss scale
    mixed    the exercise's step repeated: float32 master parameters; each step rounds a copy
             to the compute dtype, differentiates the scaled loss, unscales in float32, updates
             the masters
    pure     the parameters themselves are stored in the compute dtype (no float32 copy), and so
             are the gradients and the optimizer's state; each step's p + update is rounded
             back into that dtype by the ``pure_rounding`` rule of ``core.formats.rounding``:
             nearest (a plain cast), stochastic (random bits from the model seed and the step
             index, so a config always draws the same), or kahan (a compensation buffer in
             the compute dtype, carried from step to step)

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

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.core.data.user_data import UserData, fitted
from playground.core.formats import rounding
from playground.core.frozen import freeze
from playground.core.model.models import initial_state, rebuilt
from playground.core.model.optimizers import build_optimizer, float32_state
from playground.core.recipes.float8 import AmaxHistory, matmul_layers
from playground.core.settings.settings import MAX_STEPS, StepConfig, check_setting
from playground.core.step.compiled import program, run_compiled
from playground.core.step.loss_scale import make_loss_scale
from playground.core.step.one_step import float32_mse, in_param_dtype, scaled_step, widened
from playground.core.step.policy import Policy, policy_for


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

    @property
    def mixed_applied(self) -> int:
        """Updates the mixed run applied (steps minus skips)."""
        return int(self.steps - self.mixed_skipped.sum())


_ROUNDING_STREAM = 0x73726E64  # "srnd": keeps the rounding bits apart from nnx.Rngs' streams


def capacity(steps: int) -> int:
    """The compiled run's buffer length: the power of two at or above ``steps``.

    The run length itself is traced, so one program serves every length of a bucket and at
    most log2(MAX_STEPS) + 1 programs exist per (shapes, dtype, mode) instead of one per length.
    """
    return 1 << (steps - 1).bit_length()


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

    Returns per-step buffers of length ``capacity`` and loss buffers of length capacity + 1;
    entries past ``steps`` (past steps + 1 for losses) are unused zeros.
    """
    # Initial parameters from their own program (models.initial_state), so that a new batch size
    # does not compile the initializers' random draws into its run again.
    network = rebuilt(model, x.shape[-1], y.shape[-1], initial)
    graphdef, master = nnx.split(network, nnx.Param)
    # The pure run stores its parameters in the recipe's forward format (float8: E4M3).
    pure = jax.tree.map(precision.without_masters().cast_to_param, master)
    history = None
    if precision.compute.quantizes:
        history = AmaxHistory.fresh(len(matmul_layers(network)), amax_history)
    plain = optax.chain(build_optimizer(optimizer, lr), in_param_dtype())
    start = make_loss_scale(mode, loss_scale, period)
    # Only a skipping policy (dynamic) drops non-finite updates; the exercise's fixed scale
    # lets them through.
    if start.skips_nonfinite:
        tx = optax.apply_if_finite(plain, max_consecutive_errors=MAX_STEPS + 1)
    else:
        tx = plain
    float32_tx = optax.chain(build_optimizer(float32_state(optimizer), lr), in_param_dtype())

    # The stochastic run's random bits: a stream of the model seed apart from the init's,
    # folded with the step index in the loop.
    rounding_key = jax.random.fold_in(jax.random.key(model_seed), _ROUNDING_STREAM)

    def one_step(carry, index):
        float32_params, float32_opt, runs = carry
        float32_loss, grads = jax.value_and_grad(float32_mse, argnums=1)(
            graphdef, float32_params, x, y, precision.task
        )
        updates, float32_opt = float32_tx.update(grads, float32_opt, float32_params)
        float32_params = optax.apply_updates(float32_params, updates)
        outputs = {"float32_loss": float32_loss}
        new_runs = {}
        for name, (params, opt_state, policy, state, history) in runs.items():
            outputs[f"{name}_loss"] = float32_mse(graphdef, params, x, y, precision.task)
            outputs[f"{name}_scale"] = policy.loss_scale
            rounded = None
            if name == "pure" and pure_rounding != "nearest":
                rounded = (pure_rounding, state, jax.random.fold_in(rounding_key, index))
            params, opt_state, finite, lost, state, saturated, history, flushed = scaled_step(
                graphdef, params, x, y, policy, precision, tx, opt_state, rounded, history
            )
            outputs[f"{name}_skipped"] = start.skips_nonfinite & ~finite
            outputs[f"{name}_lost_share"] = lost
            outputs[f"{name}_flushed_share"] = flushed
            outputs[f"{name}_saturated_share"] = saturated
            new_runs[name] = (params, opt_state, policy.adjust(finite), state, history)
        return (float32_params, float32_opt, new_runs), outputs

    def body(index, state):
        carry, buffers = state
        carry, outputs = one_step(carry, index)
        return carry, {k: buffers[k].at[index].set(v) for k, v in outputs.items()}

    pure_state = rounding.init_state(pure_rounding, pure)
    runs = {
        "mixed": (master, tx.init(master), start, None, history),
        "pure": (pure, tx.init(jax.tree.map(widened, pure)), start, pure_state, history),
    }
    carry = (master, float32_tx.init(master), runs)
    shapes = jax.eval_shape(lambda c: one_step(c, 0)[1], carry)
    buffers = {
        k: jnp.zeros(capacity + k.endswith("_loss"), shape.dtype) for k, shape in shapes.items()
    }
    (float32_params, _, runs), buffers = jax.lax.fori_loop(0, steps, body, (carry, buffers))
    # The loss after the last update closes each curve: K + 1 points for K steps.
    finals = {"float32": float32_params} | {name: run[0] for name, run in runs.items()}
    for name, params in finals.items():
        key = f"{name}_loss"
        final = float32_mse(graphdef, params, x, y, precision.task)
        buffers[key] = buffers[key].at[steps].set(final)
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

    Returns:
      A DynamicsReport. One compiled program per (shapes, precision policy, mode,
      capacity(steps), pure_rounding).

    Raises:
      ConfigError naming the bad setting.
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
        config=config,
        steps=config.steps,
        mode=config.mode,
        period=config.period,
        pure_rounding=config.pure_rounding,
        **curves,
    )
