"""The rule's options (``core.step.step.step_trace``): parameters stored in a low dtype with a
rounding and its state, a loss-scale policy that skips, an optimizer state carried from the step
before; each against numpy / ml_dtypes arithmetic or optax itself, written here.

Each program is compiled without backend optimizations (tests/traced_step.py says why), on one
small shape.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from traced_step import UNOPTIMIZED

from playground.core.step.loss_scale import NoOpLossScale, make_loss_scale
from playground.core.step.policy import FLOAT32_TWIN, Policy
from playground.core.step.step import Rounding, step_trace

N, D_IN, D_OUT = 64, 8, 4
LR = np.float32(0.05)


def _batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return (
        rng.standard_normal((N, D_IN)).astype(np.float32),
        rng.standard_normal((N, D_OUT)).astype(np.float32),
    )


@functools.partial(jax.jit, compiler_options=UNOPTIMIZED)
def _kahan_step(params, compensation, x, y, loss_scale):
    """One float16-stored sgd step under a dynamic loss scale, stored by Kahan's rule."""
    graphdef = nnx.split(nnx.Linear(D_IN, D_OUT, rngs=nnx.Rngs(0)), nnx.Param)[0]
    model = nnx.merge(graphdef, params)
    scale = make_loss_scale("dynamic", loss_scale, 100)
    trace = step_trace(
        model,
        optax.sgd(LR),
        x,
        y,
        scale,
        Policy.of("float16"),
        rounding=Rounding("kahan", compensation),
    )
    return trace._replace(opt_state=None, float8_history=None), nnx.state(model, nnx.Param)


def _stored(dtype) -> tuple[nnx.State, nnx.State]:
    """An nnx.Linear's Params stored in ``dtype``, and a nonzero Kahan compensation for them."""
    params = nnx.state(nnx.Linear(D_IN, D_OUT, rngs=nnx.Rngs(0)), nnx.Param)
    params = jax.tree.map(lambda p: p.astype(dtype), params)
    rng = np.random.default_rng(1)
    compensation = jax.tree.map(
        lambda p: jnp.asarray(1e-4 * rng.standard_normal(p.shape), dtype), params
    )
    return params, compensation


def _arrays(state: nnx.State) -> dict[str, np.ndarray]:
    return {".".join(map(str, path)): np.asarray(v[...]) for path, v in nnx.to_flat_state(state)}


def test_a_float16_stored_step_holds_its_gradient_and_update_and_adds_them_by_kahan():
    params, compensation = _stored(jnp.float16)
    x, y = _batch()
    trace, model_params = _kahan_step(params, compensation, x, y, np.float32(1024))
    c = _arrays(compensation)
    assert bool(trace.finite) and not bool(trace.skipped)
    for name, p in trace.params_before.items():
        p = np.asarray(p)
        scaled = np.asarray(trace.scaled_grads[name])
        grads = (scaled.astype(np.float32) / np.float32(1024)).astype(np.float16)
        np.testing.assert_array_equal(trace.grads[name], grads)
        update = (-LR * grads.astype(np.float32)).astype(np.float16)  # optax.sgd in float32
        np.testing.assert_array_equal(trace.updates[name], update)
        # Kahan in float16 arithmetic: y = u - c; t = p + y; c = (t - p) - y; p = t.
        addend = update - c[name]
        total = p + addend
        assert total.dtype == np.float16
        np.testing.assert_array_equal(trace.params_after[name], total)
        np.testing.assert_array_equal(_arrays(trace.rounding_state)[name], (total - p) - addend)
        np.testing.assert_array_equal(_arrays(model_params)[name], total)


def test_a_skipped_step_leaves_the_stored_params_and_the_compensation_as_they_were():
    params, compensation = _stored(jnp.float16)
    x, y = _batch()
    # 2^40 is past float16's range: the scaled loss overflows, the policy skips the step.
    trace, model_params = _kahan_step(params, compensation, x, y, np.float32(2.0**40))
    assert not bool(trace.finite) and bool(trace.skipped)
    for name, before in _arrays(params).items():
        np.testing.assert_array_equal(trace.updates[name], np.zeros_like(before))
        np.testing.assert_array_equal(trace.params_after[name], before)
        np.testing.assert_array_equal(_arrays(model_params)[name], before)
        np.testing.assert_array_equal(
            _arrays(trace.rounding_state)[name], _arrays(compensation)[name]
        )


def test_a_carried_optimizer_state_makes_two_steps_of_optax_momentum():
    x, y = _batch(2)
    tx = optax.sgd(LR, momentum=0.9)

    @functools.partial(jax.jit, compiler_options=UNOPTIMIZED)
    def two_steps(x, y):
        model = nnx.Linear(D_IN, D_OUT, rngs=nnx.Rngs(3))
        first = step_trace(model, tx, x, y, NoOpLossScale(), FLOAT32_TWIN)
        second = step_trace(
            model, tx, x, y, NoOpLossScale(), FLOAT32_TWIN, opt_state=first.opt_state
        )
        return second.params_after

    # The test's own float32 loop: its MSE, jax.grad and optax's momentum, applied twice.
    start = nnx.Linear(D_IN, D_OUT, rngs=nnx.Rngs(3))
    params = {"kernel": start.kernel[...], "bias": start.bias[...]}

    def mse(params):
        return jnp.mean((x @ params["kernel"] + params["bias"] - y) ** 2)

    carried, fresh = params, params
    state = tx.init(params)
    for _ in range(2):
        updates, state = tx.update(jax.grad(mse)(carried), state, carried)
        carried = optax.apply_updates(carried, updates)
        # A step that forgets the state (momentum's trace starts again at zero) lands elsewhere.
        updates, _ = tx.update(jax.grad(mse)(fresh), tx.init(fresh), fresh)
        fresh = optax.apply_updates(fresh, updates)

    after = two_steps(x, y)
    for name in ("kernel", "bias"):
        np.testing.assert_allclose(after[name], carried[name], rtol=1e-6, atol=1e-7)
        assert not np.allclose(after[name], fresh[name], rtol=1e-4, atol=0)
