"""One training step in mixed precision: the rule every step of the playground runs.

The mixed-precision rule (the seed exercise), for a model, an optimizer, a batch (x, y), a loss
scale S and a compute dtype ``low`` (bfloat16 in the exercise)::

    masters      = model's float32 parameters; opt_state = tx.init(masters)
    loss(m)      = mean((low(m)(low(x)) - low(y)) ** 2)     # low(m): a temporary rounded copy
    scaled_grads = grad(S * float32(loss(m)))(model)        # float32 leaves, low-precision values
    grads        = float32(scaled_grads) / S                # unscale BEFORE the update
    updates, opt_state = tx.update(grads, opt_state, masters)
    masters      = masters + updates                        # exactly once (nnx.Optimizer.update)
    new_loss     = float32(loss(model)).reshape(1)          # unscaled, after the step

The temporary model is rebuilt from ``nnx.split`` / ``tree_map(astype)`` / ``nnx.merge``, so the
float32 master parameters are never overwritten by their rounded copies, and the gradient flows
back through the casts to float32 leaves.

``step_trace`` runs that rule, and keeps every intermediate, for every step of the playground;
its options are the only differences between them:

    the exercise     (``mixed_precision_step``) nnx.Linear, ``optax.sgd(lr)``, a fixed S, the
                     bfloat16 recipe (``policy.EXERCISE``), a fresh optimizer state
    its float32 twin (``float32_step``) the same with every cast an identity
                     (``policy.FLOAT32_TWIN``) and S = 1: multiplying and dividing by 1 is exact
    the general step any registered model and optimizer, any loss-scale policy of
                     ``core.step.loss_scale`` and any precision ``Policy`` (``core.step.policy``:
                     ``low`` is its recipe's casts and matmul); ``watch``: each operation checked
                     for inf and NaN; ``hidden``: the hidden activations' gradients kept
    a run's step     (``core.runs.train``) the optimizer state, loss-scale policy and amax
                     history carried from the step before; parameters stored in the compute
                     dtype itself (a pure run: no masters) with the run's ``Rounding``

where parameters are stored in a low-precision dtype, the rule reads::

    point        = the stored parameters (float8 and float4 ones widened to float32, the same
                   values: their arrays take no implicit promotion, and JAX's own derivative of
                   the cast would round the gradient to the stored format)
    grads        = param_dtype(float32(scaled_grads) / S)   # held in the stored dtype, and so
                                                            # are the updates and tx's state
    updates, opt_state = tx.update(grads, opt_state, point)
    p            = rounding(p + updates)                    # Rounding: nearest, stochastic, kahan

and a loss-scale policy that skips non-finite steps (dynamic) runs tx inside
``optax.apply_if_finite``, so a skipped step's update is zero and its state unchanged (the
rounding's state too). ``step_optimizer`` is that transformation.

A scaled recipe (float8) rounds differently: ``low(m)`` keeps the float32 parameters and data,
and only the operands of every matmul are rounded, to its forward format on the way forward and
its gradient format on the way back, with per-tensor scales (``core.recipes.float8``); the
loss, S and the unscaling are as above, in float32.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.core.formats.rounding import apply_rounded
from playground.core.model.models import DEFAULT_MODEL, Params, build_model, param_arrays
from playground.core.model.op_policy import Watched
from playground.core.model.optimizers import DEFAULT_OPTIMIZER, build_optimizer
from playground.core.recipes.float8 import AmaxHistory, matmul_layers
from playground.core.settings.settings import MAX_STEPS, ConfigError, check_setting, settings
from playground.core.step.loss_scale import LossScale, StaticLossScale, all_finite
from playground.core.step.policy import EXERCISE, FLOAT32_TWIN, Policy


class Rounding(NamedTuple):
    """How a step stores p + update in its parameters' dtype.

    Attributes:
      rule: one of ``core.formats.rounding.ROUNDINGS``: ``nearest`` (a plain cast, float32
        masters' rule), ``stochastic`` or ``kahan``.
      state: the rule's state carried from the step before (Kahan's compensation, from
        ``rounding.init_state``; None for the others).
      key: this step's random key (stochastic only; None otherwise).
    """

    rule: str = "nearest"
    state: Any = None
    key: jax.Array | None = None


NEAREST = Rounding()


class StepTrace(NamedTuple):
    """Everything one step computes, as JAX arrays; parameters are {path name: array}.

    Attributes:
      initial_loss: (1,) float32, the unscaled loss before the update.
      scaled_grads: float32 leaves holding the gradients of ``S * loss`` as the low-precision
        backward pass produced them.
      grads: ``scaled_grads / S`` in float32, held in the parameters' dtype: what the optimizer
        received (float32 for masters).
      updates: what the optimizer added to the parameters (before rounding), in their dtype.
      activation_grads: one array per hidden activation, input side first: the gradient of
        ``S * loss`` with respect to that activation, in the compute dtype (empty for a model
        without hidden layers).
      params_before, params_after: the parameters as stored around the update (float32 masters,
        or a pure run's low-precision ones).
      new_loss: (1,) float32, the unscaled loss after the update (None when not asked for).
      opt_state: the optimizer's state after the step (``step_optimizer``'s).
      finite: whether every gradient entry was finite.
      skipped: whether the loss-scale policy skipped the update (a policy that skips
        non-finite steps, and a non-finite gradient).
      rounding_state: the rounding's state after the step (``Rounding.state``'s successor).
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
    new_loss: jax.Array | None
    opt_state: optax.OptState
    finite: jax.Array
    skipped: jax.Array
    rounding_state: Any = None
    float8_stats: jax.Array | None = None
    float8_history: AmaxHistory | None = None
    forward_finite: jax.Array | None = None
    backward_nonfinite: jax.Array | None = None
    loss_in_compute_dtype: jax.Array | None = None
    loss_in_float32: jax.Array | None = None


def float32_twin(precision: Policy) -> Policy:
    """The float32 twin of a step computing by ``precision``: the same task's loss, every
    operation in float32."""
    return dataclasses.replace(FLOAT32_TWIN, task=precision.task)


def widened(param: jax.Array) -> jax.Array:
    """A float8- or float4-stored parameter as float32 (the same value); any other as it is."""
    return param.astype(jnp.float32) if jnp.finfo(param.dtype).bits <= 8 else param


def _in_param_dtype() -> optax.GradientTransformation:
    """Hold each update in its parameter's dtype (a no-op for float32 masters)."""

    def update(updates, state, params=None):
        return jax.tree.map(lambda u, p: u.astype(p.dtype), updates, params), state

    return optax.GradientTransformation(lambda params: optax.EmptyState(), update)


def step_optimizer(
    tx: optax.GradientTransformation, loss_scale: LossScale
) -> optax.GradientTransformation:
    """``tx`` as the rule applies it: each update held in its parameter's dtype (a pure run's
    update is a compute-dtype number, as its gradient and state are), and under a loss-scale
    policy that skips non-finite steps, inside ``optax.apply_if_finite`` (whose two branches,
    update and skip, then agree on dtypes). A run's carried ``opt_state`` is this one's."""
    held = optax.chain(tx, _in_param_dtype())
    if loss_scale.skips_nonfinite:
        return optax.apply_if_finite(held, max_consecutive_errors=MAX_STEPS + 1)
    return held


def _add_nearest(params, updates):
    """p + update rounded to nearest in p's dtype (float8 takes no implicit promotion)."""

    def add(param, update):
        if jnp.finfo(param.dtype).bits <= 8:
            return (param.astype(jnp.float32) + update).astype(param.dtype)
        return optax.apply_updates(param, update)

    return jax.tree.map(add, params, updates)


def _stored(params, updates, rounding: Rounding, skipped: jax.Array) -> tuple[Any, Any]:
    """(p + updates stored by ``rounding``, the rounding's new state)."""
    if rounding.rule == "nearest":
        return _add_nearest(params, updates), rounding.state
    new_params, new_state = apply_rounded(
        rounding.rule, params, updates, rounding.state, rounding.key
    )
    if rounding.state is not None:
        # A skipped step's update is zero, yet Kahan would still fold c into p: keep both.
        new_params, new_state = jax.tree.map(
            lambda old, new: jnp.where(skipped, old, new),
            (params, rounding.state),
            (new_params, new_state),
        )
    return new_params, new_state


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
    *,
    opt_state: optax.OptState | None = None,
    rounding: Rounding = NEAREST,
    hidden: tuple[int, ...] = (),
    float8_history: AmaxHistory | None = None,
    watch: int = 0,
    new_loss: bool = True,
) -> StepTrace:
    """Run the mixed-precision rule on ``model`` (updated in place) and keep its intermediates.

    Args:
      model: a model of the registry; its Params are the parameters as stored: float32 masters
        (a fresh model), or a run's, in the compute dtype for a pure run.
      tx: an optax transformation from the registry (the rule applies ``step_optimizer``'s).
      x: (N, D_in) float32. y: (N, D_out) float32.
      loss_scale: a policy from ``playground.core.step.loss_scale`` (the exercise: StaticLossScale).
      precision: how the step computes (its recipe, for a scaled one its fp8_scaling).
      opt_state: a run's optimizer state from its step before (default: a fresh one).
      rounding: how p + update is stored (default: to nearest).
      hidden: the widths of the model's hidden activations (``ModelChoice.hidden_widths``),
        whose gradients are kept (one zero probe each).
      float8_history: a quantizing recipe (float8) only: the amax history the step's delayed
        scales come from (default: a fresh one, scale 1).
      watch: 0, or the number of operations of the forward pass (the model's ``operations``
        and the loss) to check for inf and NaN forward and backward (``core.model.op_policy``).
      new_loss: whether to compute the loss after the update (step 6); a run's step does not,
        since its next step starts from that loss.

    Returns:
      A StepTrace of JAX arrays.
    """
    # 1. The stored Params move into `stored` (the graph and any other state stay apart); the
    # point the step differentiates at is theirs, a float8 or float4 one widened to float32.
    graphdef, stored, rest = nnx.split(model, nnx.Param, ...)
    point = jax.tree.map(widened, stored)
    optimizer = step_optimizer(tx, loss_scale)
    if opt_state is None:
        opt_state = optimizer.init(point)

    # 2-4. Low-precision loss, cast back to float32 and scaled; differentiated w.r.t. `point`.
    # Zero probes on the hidden activations: their gradients are the activation gradients.
    quantizes = precision.compute.quantizes
    activation_dtype = precision.op_dtype("activation")
    probes = tuple(jnp.zeros((x.shape[0], width), activation_dtype) for width in hidden)
    # A quantizing recipe: the metas' gradients are the statistics of every quantized tensor.
    if quantizes and float8_history is None:
        float8_history = AmaxHistory.fresh(len(matmul_layers(model)))
    metas = float8_history.metas() if quantizes else ()

    # Watched: zero flags, whose gradients say where the backward pass first met inf or NaN.
    flags = jnp.zeros((watch,), jnp.float32) if watch else ()

    def scaled_loss(point, probes: tuple, metas, flags):
        temporary = nnx.merge(graphdef, point, rest)
        watched = watched_loss(temporary, x, y, precision, probes, metas, flags if watch else None)
        return loss_scale.scale(precision.cast_to_output(watched.loss)), watched

    value_and_grad = jax.value_and_grad(scaled_loss, argnums=(0, 1, 2, 3), has_aux=True)
    (_, watched), (scaled_grads, activation_grads, float8_stats, flag_grads) = value_and_grad(
        point, probes, metas, flags
    )
    initial_loss = watched.loss

    # 5. Unscale in float32, so the unscaling itself cannot underflow, then hold the gradient in
    # the point's dtype; a single optimizer update, stored by the rounding rule.
    grads = jax.tree.map(lambda g, p: g.astype(p.dtype), loss_scale.unscale(scaled_grads), point)
    finite = all_finite(grads)
    skipped = loss_scale.skips_nonfinite & ~finite
    updates, opt_state = optimizer.update(grads, opt_state, point)
    new_stored, rounding_state = _stored(stored, updates, rounding, skipped)
    # Read before the update: `stored` holds the model's own Variables, which it updates.
    params_before = param_arrays(stored)
    nnx.update(model, new_stored)

    # 6. The unscaled low-precision loss of the updated model (a quantizing recipe: with the
    # scales the next step would use).
    if quantizes:
        float8_history = float8_history.record(float8_stats)
        metas = float8_history.metas()
    loss_after = None
    if new_loss:
        loss_after = low_precision_loss(model, x, y, precision, metas=metas)
        loss_after = precision.cast_to_output(loss_after).reshape((1,))
    return StepTrace(
        initial_loss=precision.cast_to_output(initial_loss).reshape((1,)),
        scaled_grads=param_arrays(scaled_grads),
        grads=param_arrays(grads),
        updates=param_arrays(updates),
        activation_grads=tuple(activation_grads),
        params_before=params_before,
        params_after=param_arrays(new_stored),
        new_loss=loss_after,
        opt_state=opt_state,
        finite=finite,
        skipped=skipped,
        rounding_state=rounding_state,
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
      x: (N, D_in) float32, numpy or JAX.
      y: (N, D_out) float32.
      lr: finite, >= 0.
      loss_scale: finite, > 0 (within the settings table's range).

    Returns:
      (1,) float32 JAX array: the bfloat16 MSE after one step, cast to float32.

    Raises:
      ConfigError: (a ValueError) naming the bad argument.
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
