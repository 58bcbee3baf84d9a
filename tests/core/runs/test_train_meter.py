"""The lost-update meter's two counts: updates zero because their gradient flushed to zero, and
nonzero updates rounded away when added to the stored weight (playground.core.runs.train)."""

import numpy as np
import pytest

import reference
from playground import StepConfig, make_batch, run_dynamics
from playground.core.recipes.registry import RECIPES

# The recipes that are a plain cast.
PLAIN_DTYPES = [name for name, entry in RECIPES.items() if entry.plain_dtype is not None]

# Data near 2^-24: float64's gradients are far below half of float16's smallest subnormal.
VANISHING = StepConfig(
    n=32, d_in=8, d_out=4, input_scale=2.0**-24, target_scale=2.0**-24, loss_scale=1.0
)


def float64_first_grads(config: StepConfig) -> tuple[np.ndarray, np.ndarray]:
    """The loss's gradient with respect to the prediction, and every parameter's gradient, at
    the initial weights, in float64."""
    x, y = (a.astype(np.float64) for a in make_batch(config))
    kernel, bias = (p.astype(np.float64) for p in reference.initial_params(config.model_seed, 8, 4))
    d_prediction = 2 * (x @ kernel + bias - y) / y.size
    grads = np.concatenate([(x.T @ d_prediction).ravel(), d_prediction.sum(axis=0)])
    return d_prediction, grads


def test_float16_at_s1_counts_every_update_lost_to_a_flushed_gradient():
    # The backward pass's first float16 tensor, d loss / d prediction, rounds to 0 everywhere,
    # and so does every gradient made from it; float32's are all nonzero.
    d_prediction, grads = float64_first_grads(VANISHING)
    half_subnormal = float(np.finfo(np.float16).smallest_subnormal) / 2
    assert np.all(grads != 0) and np.abs(d_prediction).max() < half_subnormal / 4
    dynamics = run_dynamics(VANISHING.replace(compute_dtype="float16"), 4, "static")
    # Every entry's update was zero because its gradient flushed: none was left to round away.
    np.testing.assert_array_equal(dynamics.mixed_flushed_share, 1.0)
    np.testing.assert_array_equal(dynamics.pure_flushed_share, 1.0)
    np.testing.assert_array_equal(dynamics.mixed_lost_share, 0.0)
    np.testing.assert_array_equal(dynamics.mixed_loss, dynamics.mixed_loss[0])


def test_bfloat16_keeps_the_same_gradients_and_counts_no_flush():
    # bfloat16 has float32's exponent range: 2^-48-sized gradients are normal numbers there.
    _, grads = float64_first_grads(VANISHING)
    assert np.abs(grads).min() > np.finfo(np.float32).smallest_normal
    dynamics = run_dynamics(VANISHING, 4, "static")
    flushed = dynamics.mixed_flushed_share
    float16 = run_dynamics(VANISHING.replace(compute_dtype="float16"), 4, "static")
    # The meter counts any zero that float32 does not have; in bfloat16 at most one of the 36
    # entries (a sum whose 8-bit terms cancel), against every one of them in float16.
    assert flushed.max() <= 1 / 36 < float16.mixed_flushed_share.min() == 1.0


@pytest.mark.parametrize("dtype", PLAIN_DTYPES)
def test_the_two_counts_never_overlap(dtype):
    # A run with both kinds of loss: bfloat16's pure run rounds small updates away.
    config = StepConfig(n=32, d_in=8, d_out=4, lr=0.002, compute_dtype=dtype)
    dynamics = run_dynamics(config, 20, "static")
    for run in ("mixed", "pure"):
        total = getattr(dynamics, f"{run}_flushed_share") + getattr(dynamics, f"{run}_lost_share")
        assert np.all(total <= 1.0)
    assert dynamics.pure_lost_share.mean() > 0  # the pure run's updates do get rounded away
