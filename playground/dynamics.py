"""Training dynamics: K SGD steps of three runs on one batch, as one compiled ``lax.scan``.

The three runs start from the same float32 initialization (``nnx.Linear`` from the model seed):

    float32  every array float32, no loss scale
    mixed    the seed exercise's step repeated: float32 master parameters; each step rounds a copy
             to the compute dtype, differentiates the scaled loss, unscales in float32, updates
             the masters
    pure     the parameters themselves are stored in the compute dtype (no float32 copy); each
             step's p - lr * g is rounded back into that dtype

Loss scaling (mixed and pure runs), one of:

    none     S = 1
    static   S = loss_scale, fixed (the exercise)
    dynamic  start at S = loss_scale; after each step
               if every gradient entry is finite:
                   good += 1; if good == period: S *= factor and good = 0
               else:
                   skip the update; S = max(S * backoff, min_scale); good = 0

The dynamic rule and its defaults are those of PyTorch's ``torch.amp.GradScaler``
(growth_factor=2, backoff_factor=0.5, growth_interval=2000) and DeepMind's ``jmp.DynamicLossScale``
(factor=2, period=2000, min_loss_scale=1). Skipping is ``optax.apply_if_finite``; the scale
update is written here because neither library is a dependency of this JAX + optax app (jmp is
not maintained for current JAX, and PyTorch is another framework).

Recorded per step (before that step's update): the float32 MSE of each run's parameters, so the
three curves compare models rather than loss rounding; the scale used; whether the update was
skipped; and, for the mixed and pure runs, the share of parameter entries whose update was
rounded away entirely (lr * g != 0 but p_new == p).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.config import Bounds, ConfigError, StepConfig, check_setting
from playground.data import make_batch
from playground.step import low_precision_loss

SCALING_MODES = ("none", "static", "dynamic")
MAX_STEPS = 1000
GROWTH_FACTOR = 2.0  # torch GradScaler growth_factor; jmp factor
BACKOFF_FACTOR = 0.5  # torch GradScaler backoff_factor; jmp divides by factor
DEFAULT_PERIOD = 2000  # torch growth_interval; jmp period
MIN_SCALE = 1.0  # jmp min_loss_scale
# Work cap: steps * N * D_in * D_out <= 2^37, about 10 s of training on 2 vCPUs. It allows all
# MAX_STEPS at the medium shape 1024 x 256 x 128 and 32 steps at the largest, 4096 x 1024^2,
# so one visitor cannot hold a public Space's queue for minutes.
WORK_BUDGET = 2**37
# The run's own settings, checked like StepConfig's fields (the UI reads its limits here too).
RUN_SETTINGS = {
    "steps": Bounds(
        "training steps",
        1,
        MAX_STEPS,
        "SGD steps per run; at most 2^37 / (N x D_in x D_out) of them (32 at the largest shape).",
        integer=True,
    ),
    "mode": Bounds("loss scaling", 0, 0, "How the loss scale is chosen.", choices=SCALING_MODES),
    "period": Bounds(
        "growth period", 1, 10**6, "Finite steps before a dynamic scale doubles.", integer=True
    ),
}


@dataclass(frozen=True)
class DynamicsReport:
    """Per-step curves of the three runs (read-only numpy arrays of length ``steps``).

    float32_loss, mixed_loss, pure_loss: float32 MSE of each run's parameters before the step.
    scale: the loss scale used at each step (mixed and pure runs share the rule, not the state).
    mixed_skipped, pure_skipped: True where the dynamic rule skipped that run's update.
    mixed_lost_share, pure_lost_share: share of entries whose nonzero update was rounded away.
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

    @property
    def mixed_applied(self) -> int:
        """Updates the mixed run applied (steps minus skips)."""
        return int(self.steps - self.mixed_skipped.sum())


def _float32_loss(graphdef, params, x, y):
    return low_precision_loss(nnx.merge(graphdef, params), x, y, jnp.float32)


def _lost_share(before, after, updates) -> jax.Array:
    """Share of entries with a nonzero update whose stored value did not change."""
    lost = jax.tree.map(lambda b, a, u: jnp.sum((u != 0) & (a == b)), before, after, updates)
    size = sum(leaf.size for leaf in jax.tree.leaves(before))
    return sum(jax.tree.leaves(lost)) / size


def _scaled_step(graphdef, params, x, y, scale, dtype, tx, opt_state):
    """One scaled low-precision step of ``params`` (master float32 or stored in ``dtype``).

    Returns (new params, new optimizer state, finite flag, lost-update share).
    """

    def scaled_loss(params):
        loss = low_precision_loss(nnx.merge(graphdef, params), x, y, dtype)
        return loss.astype(jnp.float32) * scale

    # Unscaled in float32 for both runs, so the unscaling itself cannot underflow; the pure run
    # loses precision where optax.apply_updates rounds p + update back into its stored dtype.
    grads = jax.tree.map(lambda g: g.astype(jnp.float32) / scale, jax.grad(scaled_loss)(params))
    finite = jnp.all(jnp.stack([jnp.all(jnp.isfinite(g)) for g in jax.tree.leaves(grads)]))
    updates, opt_state = tx.update(grads, opt_state, params)
    new_params = optax.apply_updates(params, updates)
    return new_params, opt_state, finite, _lost_share(params, new_params, updates)


def _next_scale(scale, good, finite, mode: str, period: int):
    """The dynamic rule of the module docstring; other modes keep the scale."""
    if mode != "dynamic":
        return scale, good
    good = jnp.where(finite, good + 1, 0)
    grow = good >= period
    scale = jnp.where(
        finite,
        jnp.where(grow, scale * GROWTH_FACTOR, scale),
        jnp.maximum(scale * BACKOFF_FACTOR, MIN_SCALE),
    )
    return scale, jnp.where(grow, 0, good)


@functools.partial(jax.jit, static_argnames=("steps", "mode", "period", "compute_dtype"))
def _simulate(model_seed, x, y, lr, loss_scale, *, steps, mode, period, compute_dtype):
    dtype = jnp.dtype(compute_dtype)
    model = nnx.Linear(x.shape[-1], y.shape[-1], rngs=nnx.Rngs(jax.random.key(model_seed)))
    graphdef, master = nnx.split(model, nnx.Param)
    pure = jax.tree.map(lambda p: p.astype(dtype), master)
    plain = optax.sgd(lr)
    # Only the dynamic mode skips non-finite updates (the exercise's fixed scale does not).
    skipping = optax.apply_if_finite(plain, max_consecutive_errors=MAX_STEPS + 1)
    tx = skipping if mode == "dynamic" else plain
    start_scale = jnp.float32(1.0) if mode == "none" else loss_scale

    def body(carry, _):
        float32_params, float32_opt, runs = carry
        float32_loss, grads = jax.value_and_grad(_float32_loss, argnums=1)(
            graphdef, float32_params, x, y
        )
        updates, float32_opt = plain.update(grads, float32_opt, float32_params)
        float32_params = optax.apply_updates(float32_params, updates)
        outputs = {"float32_loss": float32_loss}
        new_runs = {}
        for name, (params, opt_state, scale, good) in runs.items():
            outputs[f"{name}_loss"] = _float32_loss(graphdef, params, x, y)
            outputs[f"{name}_scale"] = scale
            params, opt_state, finite, lost = _scaled_step(
                graphdef, params, x, y, scale, dtype, tx, opt_state
            )
            outputs[f"{name}_skipped"] = (mode == "dynamic") & ~finite
            outputs[f"{name}_lost_share"] = lost
            scale, good = _next_scale(scale, good, finite, mode, period)
            new_runs[name] = (params, opt_state, scale, good)
        return (float32_params, float32_opt, new_runs), outputs

    runs = {
        name: (params, tx.init(params), start_scale, jnp.int32(0))
        for name, params in (("mixed", master), ("pure", pure))
    }
    _, curves = jax.lax.scan(body, (master, plain.init(master), runs), length=steps)
    return curves


def max_steps(config: StepConfig) -> int:
    """The most training steps allowed at ``config``'s shape (see WORK_BUDGET)."""
    return int(min(MAX_STEPS, max(1, WORK_BUDGET // (config.n * config.d_in * config.d_out))))


def run_dynamics(
    config: StepConfig, steps: int, mode: str = "static", period: int = DEFAULT_PERIOD
) -> DynamicsReport:
    """Train the three runs for ``steps`` steps with ``config``'s data, lr, loss scale and dtype.

    Args:
      config: a validated StepConfig.
      steps: 1 .. max_steps(config). mode: one of SCALING_MODES. period: growth period, >= 1.

    Returns:
      A DynamicsReport. One compiled program per (shapes, dtype, steps, mode, period).

    Raises:
      ConfigError naming the bad argument.
    """
    steps, mode, period = (
        check_setting(name, value, RUN_SETTINGS[name])
        for name, value in (("steps", steps), ("mode", mode), ("period", period))
    )
    if steps > max_steps(config):
        shape = " x ".join(map(str, config.shape))
        raise ConfigError(
            "steps",
            f"steps (training steps) must be an integer in [1, {max_steps(config)}] at "
            f"N x D_in x D_out = {shape} (steps x N x D_in x D_out <= 2^37); got {steps}",
        )
    x, y = make_batch(config)
    curves = jax.device_get(
        _simulate(
            np.uint32(config.model_seed),
            x,
            y,
            np.float32(config.lr),
            np.float32(config.loss_scale),
            steps=steps,
            mode=mode,
            period=period,
            compute_dtype=config.compute_dtype,
        )
    )
    for values in curves.values():
        values.flags.writeable = False
    return DynamicsReport(config=config, steps=steps, mode=mode, period=period, **curves)
