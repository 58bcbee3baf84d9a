"""One training step in mixed precision: the exercise's step, and the general step it is made of.

The mixed-precision rule (the seed exercise), for a model, an optimizer, a batch (x, y), a loss
scale S and a compute dtype ``low`` (bfloat16 in the exercise)::

    masters      = model's float32 parameters; optimizer = nnx.Optimizer(model, tx, wrt=nnx.Param)
    loss(m)      = mean((low(m)(low(x)) - low(y)) ** 2)     # low(m): a temporary rounded copy
    scaled_grads = grad(S * float32(loss(m)))(model)        # float32 leaves, low-precision values
    grads        = float32(scaled_grads) / S                # unscale BEFORE the update
    optimizer.update(model, grads)                          # exactly once
    new_loss     = float32(loss(model)).reshape(1)          # unscaled, after the step

The temporary model is rebuilt from ``nnx.split`` / ``tree_map(astype)`` / ``nnx.merge``, so the
float32 master parameters are never overwritten by their rounded copies, and the gradient flows
back through the casts to float32 leaves. The float32 twin is the same procedure with every cast
an identity and S = 1 (multiplying and dividing by 1 is exact).

``step_trace`` runs that rule for any registered model and optimizer, any loss-scale policy and
any precision ``Policy`` (``core.step.policy``: ``low`` is its recipe's casts and matmul),
and keeps every intermediate; ``mixed_precision_step`` is the exercise itself: ``nnx.Linear``,
``optax.sgd(lr)``, a fixed S and the bfloat16 recipe (``policy.EXERCISE``).

A scaled recipe (float8) rounds differently: ``low(m)`` keeps the float32 parameters and data,
and only the operands of every matmul are rounded, to its forward format on the way forward and
its gradient format on the way back, with per-tensor scales (``core.recipes.float8``); the
loss, S and the unscaling are as above, in float32.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.core.model.models import DEFAULT_MODEL, Params, build_model, param_arrays
from playground.core.model.op_policy import Watched
from playground.core.model.optimizers import DEFAULT_OPTIMIZER, build_optimizer
from playground.core.recipes.float8 import AmaxHistory, matmul_layers
from playground.core.settings.settings import ConfigError, check_setting, settings
from playground.core.step.loss_scale import LossScale, StaticLossScale
from playground.core.step.policy import EXERCISE, FLOAT32_TWIN, Policy


class StepTrace(NamedTuple):
    """Everything one step computes, as JAX arrays; parameters are {path name: array}.

    Attributes:
      initial_loss: (1,) float32, the unscaled loss before the update.
      scaled_grads: float32 leaves holding the gradients of ``S * loss`` as the low-precision
        backward pass produced them.
      grads: float32, ``scaled_grads / S``: what the optimizer received.
      updates: float32, what the optimizer added to the parameters (before rounding).
      activation_grads: one array per hidden activation, input side first: the gradient of
        ``S * loss`` with respect to that activation, in the compute dtype (empty for a model
        without hidden layers).
      params_before, params_after: float32 master parameters around the update.
      new_loss: (1,) float32, the unscaled loss after the update.
      float8_stats: a quantizing recipe (float8) only, (matmuls, roles, STATS) float32: per
        matmul (in parameter order) the statistics of its input, kernel and gradient tensors.
      float8_history: a quantizing recipe only, the amax history after this step (whose scales
        the new loss used).
      forward_finite, backward_nonfinite: a watched step only (``watch`` > 0), one entry per
        operation of the initial forward pass (the model's ``operations``, then the loss):
        whether its result was all finite (bool), and 1.0 where the gradient of ``S * loss``
        arriving at its result held an inf or a NaN (float32).
      loss_in_compute_dtype, loss_in_float32: a watched step only, (1,) float32: the initial
        loss of the same outputs computed in the compute dtype and in float32.
    """

    initial_loss: jax.Array
    scaled_grads: Params
    grads: Params
    updates: Params
    activation_grads: tuple[jax.Array, ...]
    params_before: Params
    params_after: Params
    new_loss: jax.Array
    float8_stats: jax.Array | None = None
    float8_history: AmaxHistory | None = None
    forward_finite: jax.Array | None = None
    backward_nonfinite: jax.Array | None = None
    loss_in_compute_dtype: jax.Array | None = None
    loss_in_float32: jax.Array | None = None


class _KeptUpdates(NamedTuple):
    inner: optax.OptState
    updates: optax.Updates


def keeping_updates(tx: optax.GradientTransformation) -> optax.GradientTransformation:
    """``tx`` whose state also holds the last updates it produced, so a caller can read them.

    The updates are those ``tx`` returns; nothing is computed twice.
    """

    def init(params):
        return _KeptUpdates(tx.init(params), jax.tree.map(jnp.zeros_like, params))

    def update(updates, state, params=None):
        updates, inner = tx.update(updates, state.inner, params)
        return updates, _KeptUpdates(inner, updates)

    return optax.GradientTransformation(init, update)


def low_precision_loss(
    model: nnx.Module,
    x: jax.Array,
    y: jax.Array,
    precision: Policy,
    probes: tuple = (),
    metas: jax.Array | tuple = (),
) -> jax.Array:
    """MSE of the temporary copy of ``model`` on the cast data, in ``precision.loss_dtype``.

    ``Policy.loss`` with, for a recipe whose matmuls quantize, ``metas`` carrying the delayed
    scales (a fresh history's, scale 1, when empty).
    """
    return watched_loss(model, x, y, precision, probes, metas).loss


def watched_loss(
    model: nnx.Module,
    x: jax.Array,
    y: jax.Array,
    precision: Policy,
    probes: tuple = (),
    metas: jax.Array | tuple = (),
    flags: jax.Array | None = None,
) -> Watched:
    """``low_precision_loss`` watched operation by operation (``Policy.watched_loss``)."""
    if precision.compute.quantizes and not isinstance(metas, jax.Array):
        metas = AmaxHistory.fresh(len(matmul_layers(model))).metas()
    return precision.watched_loss(model, x, y, probes, metas, flags)


def step_trace(
    model: nnx.Module,
    tx: optax.GradientTransformation,
    x: jax.Array,
    y: jax.Array,
    loss_scale: LossScale,
    precision: Policy = EXERCISE,
    hidden: tuple[int, int] = (0, 0),
    float8_history: AmaxHistory | None = None,
    watch: int = 0,
) -> StepTrace:
    """Run the mixed-precision rule on ``model`` (updated in place) and keep its intermediates.

    Args:
      model: a freshly built model from the registry; its float32 Params are the masters.
      tx: an optax transformation from the registry.
      x: (N, D_in) float32. y: (N, D_out) float32.
      loss_scale: a policy from ``playground.core.step.loss_scale`` (the exercise: StaticLossScale).
      precision: how the step computes (its recipe, for a scaled one its fp8_scaling).
      hidden: (count, width) of the model's hidden activations, whose gradients are kept.
      float8_history: a quantizing recipe (float8) only: the amax history the step's delayed
        scales come from (default: a fresh one, scale 1).
      watch: 0, or the number of operations of the forward pass (the model's ``operations``
        and the loss) to check for inf and NaN forward and backward (``core.model.op_policy``).

    Returns:
      A StepTrace of JAX arrays.
    """
    # 1. The optimizer over the float32 master Params.
    optimizer = nnx.Optimizer(model, keeping_updates(tx), wrt=nnx.Param)
    params_before = param_arrays(nnx.state(model, nnx.Param))

    # 2-4. Low-precision loss, cast back to float32 and scaled; differentiated w.r.t. `model`.
    # Zero probes on the hidden activations: their gradients are the activation gradients.
    count, width = hidden
    quantizes = precision.compute.quantizes
    activation_dtype = precision.op_dtype("activation")
    probes = tuple(jnp.zeros((x.shape[0], width), activation_dtype) for _ in range(count))
    # A quantizing recipe: the metas' gradients are the statistics of every quantized tensor.
    if quantizes and float8_history is None:
        float8_history = AmaxHistory.fresh(len(matmul_layers(model)))
    metas = float8_history.metas() if quantizes else ()

    # Watched: zero flags, whose gradients say where the backward pass first met inf or NaN.
    flags = jnp.zeros((watch,), jnp.float32) if watch else ()

    def scaled_loss(model: nnx.Module, probes: tuple, metas, flags):
        watched = watched_loss(model, x, y, precision, probes, metas, flags if watch else None)
        return loss_scale.scale(precision.cast_to_output(watched.loss)), watched

    value_and_grad = nnx.value_and_grad(scaled_loss, argnums=(0, 1, 2, 3), has_aux=True)
    (_, watched), (scaled_grads, activation_grads, float8_stats, flag_grads) = value_and_grad(
        model, probes, metas, flags
    )
    initial_loss = watched.loss

    # 5. Unscale in float32, then a single optimizer update of the master parameters.
    grads = loss_scale.unscale(scaled_grads)
    optimizer.update(model, grads)

    # 6. The unscaled low-precision loss of the updated model (a quantizing recipe: with the
    # scales the next step would use).
    if quantizes:
        float8_history = float8_history.record(float8_stats)
        metas = float8_history.metas()
    new_loss = low_precision_loss(model, x, y, precision, metas=metas)
    new_loss = precision.cast_to_output(new_loss).reshape((1,))
    return StepTrace(
        initial_loss=precision.cast_to_output(initial_loss).reshape((1,)),
        scaled_grads=param_arrays(scaled_grads),
        grads=param_arrays(grads),
        updates=param_arrays(optimizer.opt_state.updates),
        activation_grads=tuple(activation_grads),
        params_before=params_before,
        params_after=param_arrays(nnx.state(model, nnx.Param)),
        new_loss=new_loss,
        float8_stats=float8_stats if quantizes else None,
        float8_history=float8_history,
        forward_finite=watched.forward_finite if watch else None,
        backward_nonfinite=flag_grads if watch else None,
        loss_in_compute_dtype=watched.loss_in_compute_dtype.reshape((1,)) if watch else None,
        loss_in_float32=watched.loss_in_float32.reshape((1,)) if watch else None,
    )


def exercise_trace(seed, x, y, lr, loss_scale, precision: Policy = EXERCISE) -> StepTrace:
    """The exercise's step (nnx.Linear from ``nnx.Rngs(seed)``, optax.sgd, a fixed S), traced.

    ``seed`` is a Python int (as in the exercise) or a JAX PRNG key.
    """
    model = build_model(DEFAULT_MODEL, x.shape[-1], y.shape[-1], nnx.Rngs(seed))
    tx = build_optimizer(DEFAULT_OPTIMIZER, lr)  # the exercise's optax.sgd
    return step_trace(model, tx, x, y, StaticLossScale(loss_scale), precision)


def _is_concrete(value: Any) -> bool:
    return not isinstance(value, jax.core.Tracer)


def check_step_inputs(seed, x, y, lr, loss_scale) -> tuple[jax.Array, jax.Array]:
    """Validate the step's arguments; return x and y as float32 JAX arrays.

    Values that are JAX tracers (under ``jax.jit``) cannot be inspected and are passed through;
    shapes are always checked. Raises ConfigError (a ValueError) naming the argument.
    """
    table = settings()
    check_setting("seed", seed, table["model_seed"])
    for name, value in (("lr", lr), ("loss_scale", loss_scale)):
        if _is_concrete(value):
            if np.ndim(value) != 0:
                raise ConfigError(name, f"{name} must be a scalar; got shape {np.shape(value)}")
            check_setting(name, value.item() if hasattr(value, "item") else value, table[name])
    arrays = []
    for name, array in (("x", x), ("y", y)):
        dtype = getattr(array, "dtype", None)
        if dtype is None or not (
            jnp.issubdtype(dtype, jnp.floating) or jnp.issubdtype(dtype, jnp.integer)
        ):
            raise ConfigError(name, f"{name} must be a real numeric array; got {type(array)!r}")
        if np.ndim(array) != 2 or min(np.shape(array)) < 1:
            raise ConfigError(
                name,
                f"{name} must be 2-D with every dimension >= 1; got shape {np.shape(array)}",
            )
        arrays.append(jnp.asarray(array, jnp.float32))
    if x.shape[0] != y.shape[0]:
        raise ConfigError(
            "y",
            f"y must have as many rows as x; got shapes {np.shape(y)} and {np.shape(x)}",
        )
    return arrays[0], arrays[1]


def mixed_precision_step(seed, x, y, lr, loss_scale) -> jax.Array:
    """The seed exercise: one bfloat16 mixed-precision SGD step; returns the new unscaled loss.

    Args:
      seed: nonnegative integer (< 2**32) for ``nnx.Rngs``; static under ``jax.jit``.
      x: (N, D_in) float32, numpy or JAX. y: (N, D_out) float32.
      lr: finite, >= 0. loss_scale: finite, > 0 (within the settings table's range).

    Returns:
      (1,) float32 JAX array: the bfloat16 MSE after one step, cast to float32.

    Raises:
      ConfigError (a ValueError) naming the bad argument.
    """
    x, y = check_step_inputs(seed, x, y, lr, loss_scale)
    return exercise_trace(int(seed), x, y, lr, loss_scale).new_loss


def float32_step(seed, x, y, lr) -> jax.Array:
    """The float32 twin: the same initialization, data and update with no casts and no scale.

    Args and Returns as :func:`mixed_precision_step`, without ``loss_scale``; the loss is a
    float32 MSE.
    """
    x, y = check_step_inputs(seed, x, y, lr, 1.0)
    return exercise_trace(int(seed), x, y, lr, 1.0, precision=FLOAT32_TWIN).new_loss
