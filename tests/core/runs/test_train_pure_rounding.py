"""The pure run's ``pure_rounding`` in run_dynamics, against an independent replay.

The replay is written here, not imported: the bfloat16 gradient comes from the test's own
jax.grad of the MSE computed in bfloat16 (as the jmp oracle test does), and every update is
numpy / ml_dtypes arithmetic:

    unscale     float32(g) / S, held in bfloat16
    update      u = bfloat16(float32(-lr) * float32(g))            (optax.sgd in float32)
    nearest     p = bfloat16(p + u)
    kahan       y = u - c; t = p + y; c = (t - p) - y; p = t        each in bfloat16

Stochastic rounding draws its own bits, so it is checked by what it does to the run.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from flax import nnx
from stated_figures import (
    FIGURE,
    ROUNDING_SPREAD,
    states,
    states_loss,
    stopped,
)

from helpers import dynamics_report
from playground import StepConfig, dynamics_summary, make_batch, run_dynamics
from playground.views import downloads

BFLOAT16 = ml_dtypes.bfloat16
# A small learning rate: most updates are under half of bfloat16's gap at the weights.
# Dynamic scaling with a period past the run: S stays 1024 and no step is skipped (the replay's
# fixed S), and the skip test below reuses the same compiled programs (S and period are traced).
SLOW = StepConfig(n=32, d_in=8, d_out=4, lr=0.002, mode="dynamic", period=1000)
STEPS = 200


def pure_run(rounding: str):
    """The training run of SLOW with the pure run's ``rounding`` (once per process)."""
    return dynamics_report(SLOW, STEPS, pure_rounding=rounding)


@jax.jit
def bfloat16_grads(kernel, bias, x, y, scale):
    """Gradients (bfloat16) of float32(MSE in bfloat16) * scale w.r.t. bfloat16 parameters."""

    def scaled_loss(params):
        kernel, bias = params
        prediction = x.astype(jnp.bfloat16) @ kernel + bias
        loss = jnp.mean((prediction - y.astype(jnp.bfloat16)) ** 2)
        return loss.astype(jnp.float32) * scale

    return jax.grad(scaled_loss)((kernel, bias))


@jax.jit
def float32_loss(kernel, bias, x, y):
    return jnp.mean((x @ kernel.astype(jnp.float32) + bias.astype(jnp.float32) - y) ** 2)


@functools.cache
def replay(rounding: str) -> np.ndarray:
    """The pure run's loss curve (STEPS + 1 values), replayed with nearest or Kahan updates."""
    x, y = make_batch(SLOW)
    layer = nnx.Linear(SLOW.d_in, SLOW.d_out, rngs=nnx.Rngs(SLOW.model_seed))
    params = [np.asarray(layer.kernel[...]).astype(BFLOAT16)]
    params.append(np.asarray(layer.bias[...]).astype(BFLOAT16))
    compensation = [np.zeros_like(p) for p in params]
    scale, neg_lr = np.float32(SLOW.loss_scale), np.float32(-SLOW.lr)
    losses = [float32_loss(*params, x, y)]
    for _ in range(STEPS):
        grads = [
            (np.asarray(g).astype(np.float32) / scale).astype(BFLOAT16)
            for g in bfloat16_grads(*params, x, y, scale)
        ]
        updates = [(neg_lr * g.astype(np.float32)).astype(BFLOAT16) for g in grads]
        if rounding == "nearest":
            params = [p + u for p, u in zip(params, updates, strict=True)]
        else:
            for i, (p, u, c) in enumerate(zip(params, updates, compensation, strict=True)):
                addend = u - c
                total = p + addend
                compensation[i] = (total - p) - addend
                params[i] = total
        assert all(p.dtype == BFLOAT16 for p in params)
        losses.append(float32_loss(*params, x, y))
    return np.array(losses, np.float32)


def gap_to_float32(dynamics) -> float:
    return abs(float(dynamics.pure_loss[-1]) - float(dynamics.float32_loss[-1]))


@pytest.mark.parametrize("rounding", ["nearest", "kahan"])
def test_pure_run_matches_the_replay(rounding):
    assert not pure_run(rounding).pure_skipped.any() and np.all(
        pure_run(rounding).pure_scale == 1024
    )
    # The replay's gradient is another XLA program, which may fuse (and round) differently
    # now and then; the curves still agree far inside the nearest-vs-Kahan difference.
    np.testing.assert_allclose(pure_run(rounding).pure_loss, replay(rounding), rtol=1e-3)
    assert pure_run("nearest").pure_loss[-1] > 1.2 * pure_run("kahan").pure_loss[-1]


def test_kahan_first_step_is_the_nearest_step():
    # c starts at 0, so the first update is p + u rounded to nearest in both.
    assert pure_run("kahan").pure_loss[1] == pure_run("nearest").pure_loss[1]
    assert pure_run("kahan").pure_loss[2] != pure_run("nearest").pure_loss[2]


@pytest.mark.parametrize("rounding", ["stochastic", "kahan"])
def test_remedies_bring_the_pure_run_to_float32(rounding):
    nearest, remedy = pure_run("nearest"), pure_run(rounding)
    drop = float(nearest.float32_loss[0] - nearest.float32_loss[-1])
    # Nearest rounding stalls: it misses a good part of float32's progress ...
    assert nearest.pure_lost_share.mean() > 0.5
    assert gap_to_float32(nearest) > 0.25 * drop
    # ... which both remedies recover almost entirely (their updates are kept on average).
    assert gap_to_float32(remedy) < 0.1 * gap_to_float32(nearest)
    assert remedy.pure_lost_share.mean() < nearest.pure_lost_share.mean()
    # The float32 and mixed runs do not depend on the pure run's rounding.
    for name in ("float32_loss", "mixed_loss", "mixed_lost_share", "mixed_scale"):
        np.testing.assert_array_equal(getattr(remedy, name), getattr(nearest, name))


def test_kahan_keeps_what_nearest_loses():
    # An update waiting in the compensation buffer is not lost; almost none vanish entirely.
    assert (
        pure_run("kahan").pure_lost_share.mean() < 0.1 * pure_run("nearest").pure_lost_share.mean()
    )


def test_stochastic_draws_are_fixed_by_the_config():
    again = run_dynamics(SLOW, STEPS, pure_rounding="stochastic")
    np.testing.assert_array_equal(again.pure_loss, pure_run("stochastic").pure_loss)
    np.testing.assert_array_equal(again.pure_lost_share, pure_run("stochastic").pure_lost_share)


@pytest.mark.parametrize("rounding", ["nearest", "stochastic", "kahan"])
def test_summary_and_reading_name_the_rounding(rounding):
    dynamics = pure_run(rounding)
    summary = dynamics_summary(dynamics)
    assert dynamics.pure_rounding == summary["pure_rounding"] == rounding
    assert summary["config"]["pure_rounding"] == rounding
    pure, float32 = float(dynamics.pure_loss[-1]), float(dynamics.float32_loss[-1])
    sentence = summary["reading"][1]
    name = {"nearest": "round-to-nearest", "stochastic": "stochastic rounding"}
    assert sentence.startswith(f"With {name.get(rounding, 'Kahan summation')} the pure bfloat16")
    said = re.search(
        rf"ended at loss (about )?({FIGURE}) against float32's (about )?({FIGURE}): "
        rf"(about )?({FIGURE}) x\.",
        sentence,
    )
    assert said, sentence
    floors = stopped(dynamics.pure_loss), stopped(dynamics.float32_loss)
    groups = said.groups()
    for word, figure, value, at_floor in zip(
        groups[0::2],
        groups[1::2],
        (pure, float32, pure / float32),
        (floors[0], floors[1], any(floors)),
        strict=True,
    ):
        assert states_loss(bool(word), figure, value, at_floor), (figure, value)
    # A share of a stopped run's updates is whole percents, any other to 0.1%.
    lost = float(dynamics.pure_lost_share.mean())
    said = re.search(r"\), ([\d.]+)% of the parameter updates", summary["reading"][2])
    assert said, summary["reading"][2]
    noisy = stopped(dynamics.pure_loss)
    assert states(said.group(1), 100 * lost, 1e-2 if noisy else ROUNDING_SPREAD)
    assert ("." in said.group(1)) != noisy


def test_dynamics_csv_holds_the_remedy_run():
    dynamics = pure_run("kahan")
    path = downloads.dynamics_csv(dynamics)
    assert "kahan" in path
    with open(path, encoding="utf-8") as file:
        rows = file.read().splitlines()
    header = rows[0].split(",")
    last = rows[-1].split(",")
    assert len(rows) == STEPS + 2
    assert np.float32(last[header.index("pure_loss")]) == dynamics.pure_loss[-1]


@pytest.mark.parametrize("rounding", ["stochastic", "kahan"])
def test_a_skipped_step_leaves_the_pure_run_alone(rounding):
    # Data 16x larger and S = 2^126 overflow bfloat16's gradients: the scale backs off to 2^120,
    # then every 4th step tries 2^121 and is skipped. A skipped step changes nothing, though
    # Kahan's buffer is nonzero by then (its update would fold c into p).
    config = SLOW.replace(loss_scale=2.0**126, period=3, input_scale=16.0, target_scale=16.0)
    dynamics = run_dynamics(config.replace(lr=SLOW.lr / 256), STEPS, pure_rounding=rounding)
    skipped = np.flatnonzero(dynamics.pure_skipped)
    assert skipped.size > 40 and skipped[-1] > 100  # skips late in the run, not just at first
    np.testing.assert_array_equal(dynamics.pure_loss[skipped + 1], dynamics.pure_loss[skipped])
    moved = dynamics.pure_loss[1:] != dynamics.pure_loss[:-1]
    assert moved.sum() > 0.5 * (STEPS - skipped.size)
