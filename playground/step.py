"""One SGD step of an ``nnx.Linear`` regression, in mixed precision and in plain float32.

The mixed-precision rule (the seed exercise), for seed s, batch (x, y), learning rate lr and
loss scale S::

    model     = nnx.Linear(D_in, D_out, rngs=nnx.Rngs(s))    # float32 master parameters
    optimizer = nnx.Optimizer(model, optax.sgd(lr), wrt=nnx.Param)
    loss(m)   = mean((low(m)(low(x)) - low(y)) ** 2)           # low(.) casts to bfloat16;
                                                               # low(m) is a temporary model
    scaled_grads = grad(float32(loss(m)) * S)(model)           # float32 leaves, bfloat16 values
    grads        = float32(scaled_grads) / S                   # unscale BEFORE the update
    optimizer.update(model, grads)                             # exactly once
    new_loss     = float32(loss(model)).reshape(1)             # unscaled, after the step

The temporary model is rebuilt from ``nnx.split`` / ``tree_map(astype)`` / ``nnx.merge``, so the
float32 master parameters are never overwritten by their rounded copies, and the gradient flows
back through the casts to float32 leaves. The float32 twin is the same procedure with every cast
an identity and S = 1 (multiplying and dividing by 1 is exact), which is the baseline the
playground compares against.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.config import ConfigError, check_setting, settings

PARAM_NAMES = ("kernel", "bias")
Params = dict[str, jax.Array]


class StepTrace(NamedTuple):
    """Everything one step computes, as JAX arrays.

    Attributes:
      initial_loss: (1,) float32, the unscaled loss before the update.
      scaled_grads: {"kernel": (D_in, D_out), "bias": (D_out,)} float32 leaves holding the
        gradients of ``S * loss`` as the low-precision backward pass produced them.
      grads: same shapes, float32, ``scaled_grads / S``: what the optimizer received.
      params_before, params_after: float32 master parameters around the update.
      new_loss: (1,) float32, the unscaled loss after the update.
    """

    initial_loss: jax.Array
    scaled_grads: Params
    grads: Params
    params_before: Params
    params_after: Params
    new_loss: jax.Array


def _param_arrays(state: nnx.State) -> Params:
    """{"kernel": array, "bias": array} from a Param State (of a model or of its gradients)."""
    return {name: state[name][...] for name in PARAM_NAMES}


def low_precision_loss(model: nnx.Linear, x: jax.Array, y: jax.Array, compute_dtype) -> jax.Array:
    """MSE of a rounded copy of ``model`` on rounded data, returned in ``compute_dtype``.

    The cast copy is a new module; ``model`` keeps its float32 arrays. Casting y only affects the
    subtraction and the mean, since the matmul's dtype is set by x and the parameters.
    """
    # Only Param state moves into `params`; the graph definition stays with `graphdef`.
    graphdef, params = nnx.split(model, nnx.Param)
    low_params = jax.tree.map(lambda p: p.astype(compute_dtype), params)
    temporary = nnx.merge(graphdef, low_params)
    prediction = temporary(x.astype(compute_dtype))
    return jnp.mean((prediction - y.astype(compute_dtype)) ** 2)


def step_trace(seed, x, y, lr, loss_scale, compute_dtype=jnp.bfloat16) -> StepTrace:
    """Run the mixed-precision step and keep its intermediate results.

    Args:
      seed: a Python int (as in the exercise) or a JAX PRNG key, passed to ``nnx.Rngs``.
      x: (N, D_in) float32. y: (N, D_out) float32.
      lr: SGD learning rate, scalar. loss_scale: scalar S > 0.
      compute_dtype: dtype of the temporary model and data (bfloat16 in the exercise).

    Returns:
      A StepTrace of JAX arrays (see its docstring for shapes and dtypes).
    """
    # 1. The float32 master model and an SGD optimizer over its Params.
    model = nnx.Linear(x.shape[-1], y.shape[-1], rngs=nnx.Rngs(seed))
    optimizer = nnx.Optimizer(model, optax.sgd(lr), wrt=nnx.Param)
    params_before = _param_arrays(nnx.state(model, nnx.Param))

    # 2-4. Low-precision loss, cast back to float32 and scaled; differentiated w.r.t. `model`.
    def scaled_loss(model: nnx.Linear):
        loss = low_precision_loss(model, x, y, compute_dtype)
        return loss.astype(jnp.float32) * loss_scale, loss

    (_, initial_loss), scaled_grads = nnx.value_and_grad(scaled_loss, has_aux=True)(model)

    # 5. Unscale in float32, then a single optimizer update of the master parameters.
    grads = jax.tree.map(lambda g: g.astype(jnp.float32) / loss_scale, scaled_grads)
    optimizer.update(model, grads)

    # 6. The unscaled low-precision loss of the updated model.
    new_loss = low_precision_loss(model, x, y, compute_dtype).astype(jnp.float32).reshape((1,))
    return StepTrace(
        initial_loss=initial_loss.astype(jnp.float32).reshape((1,)),
        scaled_grads=_param_arrays(scaled_grads),
        grads=_param_arrays(grads),
        params_before=params_before,
        params_after=_param_arrays(nnx.state(model, nnx.Param)),
        new_loss=new_loss,
    )


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
      lr: finite, >= 0. loss_scale: finite, > 0.

    Returns:
      (1,) float32 JAX array: the bfloat16 MSE after one step, cast to float32.

    Raises:
      ConfigError (a ValueError) naming the bad argument.
    """
    x, y = check_step_inputs(seed, x, y, lr, loss_scale)
    return step_trace(int(seed), x, y, lr, loss_scale).new_loss


def float32_step(seed, x, y, lr) -> jax.Array:
    """The float32 twin: the same initialization, data and update with no casts and no scale.

    Args and Returns as :func:`mixed_precision_step`, without ``loss_scale``; the loss is a
    float32 MSE.
    """
    x, y = check_step_inputs(seed, x, y, lr, 1.0)
    return step_trace(int(seed), x, y, lr, 1.0, compute_dtype=jnp.float32).new_loss
