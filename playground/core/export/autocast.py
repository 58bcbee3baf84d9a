"""The page's step as PyTorch's autocast rounds it, computed in JAX: what the PyTorch export
should print for the step, without PyTorch.

Rule, for the step's model, optimizer, batch (x, y), fixed loss scale S and compute dtype
``low`` (a plain recipe: bfloat16 or float16), from the page's starting parameters::

    loss(p)      = task_loss(float32(low(p)(low(x))), y)        # autocast: each nn.Linear and
                                                                # activation in low, mse_loss
                                                                # (or cross_entropy) upcast to
                                                                # float32; y as it is
                                                                # (each operation in the dtype
                                                                # of the ``autocast`` preset's
                                                                # kind: layer norms and a
                                                                # transformer's attention in
                                                                # float32, their parameters too)
    grads        = grad(S * loss)(masters) / S                  # float32, unscaled
    new_loss     = loss(masters after one optimizer update)

It differs from the exercise's step only in where it rounds: the exercise casts y too and
computes the squares, their mean and so the loss in ``low``. It differs from PyTorch itself in
how a layer rounds (PyTorch's CPU linear adds the bias before its one rounding; here the matmul
and the bias addition round apart) and in summation orders, which
``tests/views/test_export_torch.py`` measures. A step whose scaled gradients overflow gives a
non-finite loss here, where GradScaler would skip the step.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from playground.core.data.user_data import UserData, fitted
from playground.core.model.losses import TASK_LOSSES
from playground.core.model.models import ModelChoice, forward, initial_state, param_kind, rebuilt
from playground.core.model.op_policy import PRESETS, OpRun
from playground.core.model.optimizers import build_optimizer
from playground.core.recipes.registry import recipe
from playground.core.settings.settings import ConfigError, StepConfig
from playground.core.step.compiled import program, run_compiled
from playground.core.step.report import COMPILER_OPTIONS


@program(static_argnames=("model", "optimizer", "dtype", "task"), compiler_options=COMPILER_OPTIONS)
def _autocast_step(model_seed, x, y, lr, loss_scale, initial, *, model, optimizer, dtype, task):
    """The new loss after one step under autocast's rounding (see the rule), shape ()."""
    del model_seed  # the starting parameters come in as ``initial``
    network = rebuilt(model, x.shape[-1], y.shape[-1], initial)
    graphdef, masters = nnx.split(network, nnx.Param)

    def loss(params):
        ops = OpRun(PRESETS["autocast"], jnp.dtype(dtype).name)  # no flags: nothing watched
        low = jax.tree_util.tree_map_with_path(
            lambda path, p: p.astype(ops.dtype(param_kind(path))), params
        )
        prediction = forward(nnx.merge(graphdef, low), x.astype(dtype), (), ops)
        return TASK_LOSSES[task](prediction.astype(jnp.float32), y)

    scaled = jax.grad(lambda params: loss(params) * loss_scale)(masters)
    grads = jax.tree.map(lambda g: g / loss_scale, scaled)
    tx = build_optimizer(optimizer, lr)
    updates, _ = tx.update(grads, tx.init(masters), masters)
    return loss(optax.apply_updates(masters, updates))


def autocast_new_loss(config: StepConfig, data: UserData | None = None) -> float:
    """The step's new loss as autocast rounds it (see the rule), for a plain recipe.

    Raises:
      ConfigError on ``compute_dtype`` for a recipe that is not a plain cast (float8).
    """
    dtype = recipe(config.compute_dtype).plain_dtype
    if dtype is None:
        raise ConfigError(
            "compute_dtype",
            f"compute_dtype: autocast computes in a plain dtype; got {config.compute_dtype!r}",
        )
    config, batch = fitted(config, data)
    choice: ModelChoice = config.model_choice
    seed = np.uint32(config.model_seed)
    initial = initial_state(seed, choice=choice, d_in=config.d_in, d_out=config.d_out)
    new_loss = run_compiled(
        _autocast_step,
        config,
        initial,
        batch=batch,
        model=choice,
        optimizer=config.optimizer,
        dtype=dtype,
        task=config.task,
    )
    return float(new_loss)
