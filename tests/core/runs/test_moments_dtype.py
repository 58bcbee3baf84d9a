"""The optimizer's state stored in ``moments_dtype``: against optax's own ``mu_dtype`` for Adam's
first moment and against numpy with ml_dtypes casts for the rest; and in a training run."""

from __future__ import annotations

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import optax
import pytest

from playground.core.model.optimizers import OptimizerChoice, build_optimizer
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import StepConfig

LR, B1, B2, EPS = 0.01, 0.9, 0.999, 1e-8
BF16 = ml_dtypes.bfloat16


def bf16(values) -> np.ndarray:
    return np.asarray(values, np.float32).astype(BF16).astype(np.float32)


def decayed(decay: float, stored: np.ndarray) -> np.ndarray:
    """decay x a stored bfloat16 moment, as optax's arithmetic does it: a Python float times a
    bfloat16 array is a bfloat16 product (the decay itself rounded to bfloat16 first)."""
    return bf16(bf16(decay) * stored)


def gradients(steps: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(0)
    return [
        (rng.standard_normal(64) * 10.0 ** rng.integers(-6, 2, 64)).astype(np.float32)
        for _ in range(steps)
    ]


def run(tx, grads):
    """The states and updates of ``tx`` over the given gradients (parameters unused)."""
    params = jnp.zeros(64)
    state = tx.init(params)
    states, updates = [], []
    for grad in grads:
        update, state = tx.update(jnp.asarray(grad), state, params)
        states.append(state)
        updates.append(np.asarray(update))
    return states, updates


def test_adams_first_moment_is_optax_mu_dtype_bit_for_bit():
    grads = gradients()
    ours, _ = run(build_optimizer(OptimizerChoice("adam", "bfloat16"), LR), grads)
    theirs, _ = run(optax.adam(LR, mu_dtype=jnp.bfloat16), grads)
    for mine, optax_state in zip(ours, theirs, strict=True):
        assert mine[0].mu.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(mine[0].mu), np.asarray(optax_state[0].mu))
        assert int(mine[0].count) == int(optax_state[0].count)  # the count stays an integer


def test_adams_second_moment_and_updates_match_numpy_with_bfloat16_storage():
    grads = gradients()
    states, updates = run(build_optimizer(OptimizerChoice("adam", "bfloat16"), LR), grads)
    mu = nu = np.zeros(64, np.float32)
    for step, (grad, state, update) in enumerate(zip(grads, states, updates, strict=True), 1):
        new_mu = np.float32(1 - B1) * grad + decayed(B1, mu)
        new_nu = np.float32(1 - B2) * grad * grad + decayed(B2, nu)
        mu_hat = new_mu / (np.float32(1) - np.float32(B1) ** step)
        nu_hat = new_nu / (np.float32(1) - np.float32(B2) ** step)
        expected = -LR * mu_hat / (np.sqrt(nu_hat) + EPS)  # from the unrounded new moments
        np.testing.assert_allclose(update, expected, rtol=1e-5, atol=0)
        mu, nu = bf16(new_mu), bf16(new_nu)  # stored in bfloat16 between steps
        assert state[0].nu.dtype == jnp.bfloat16
        np.testing.assert_array_equal(np.asarray(state[0].mu, np.float32), mu)
        np.testing.assert_array_equal(np.asarray(state[0].nu, np.float32), nu)


def test_momentums_trace_is_stored_in_bfloat16():
    grads = gradients()
    states, updates = run(build_optimizer(OptimizerChoice("momentum", "bfloat16"), LR), grads)
    trace = np.zeros(64, np.float32)
    for grad, state, update in zip(grads, states, updates, strict=True):
        new_trace = grad + decayed(0.9, trace)
        np.testing.assert_allclose(update, -LR * new_trace, rtol=1e-6)
        trace = bf16(new_trace)
        np.testing.assert_array_equal(np.asarray(state[0].trace, np.float32), trace)


def test_float32_moments_are_optax_itself():
    grads = gradients()
    ours, our_updates = run(build_optimizer(OptimizerChoice("adam"), LR), grads)
    theirs, their_updates = run(optax.adam(LR), grads)
    for mine, optax_update in zip(our_updates, their_updates, strict=True):
        np.testing.assert_array_equal(mine, optax_update)


RUN = {"n": 64, "d_in": 16, "d_out": 4, "steps": 12, "lr": 0.01}


@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_bfloat16_moments_change_an_adam_run_and_leave_sgd_bit_for_bit(optimizer):
    float32 = run_dynamics(StepConfig(**RUN, optimizer=optimizer))
    bfloat16 = run_dynamics(StepConfig(**RUN, optimizer=optimizer, moments_dtype="bfloat16"))
    np.testing.assert_array_equal(bfloat16.float32_loss, float32.float32_loss)
    if optimizer == "sgd":
        np.testing.assert_array_equal(bfloat16.mixed_loss, float32.mixed_loss)
        np.testing.assert_array_equal(bfloat16.pure_loss, float32.pure_loss)
    else:
        # The first update reads no stored state; the later ones read the rounded moments.
        assert bfloat16.mixed_loss[1] == float32.mixed_loss[1]
        assert not np.array_equal(bfloat16.mixed_loss, float32.mixed_loss)
