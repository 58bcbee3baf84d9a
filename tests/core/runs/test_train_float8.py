"""Float8 in the training dynamics: delayed scaling clips the step after a jump, then recovers."""

import numpy as np
import pytest

from playground.core.runs.train import run_dynamics
from scenarios import FLOAT8_SPIKES

# Dynamic loss scaling doubles S after every 5 finite steps. The gradient arriving at the
# matmul is S x dloss/dprediction, so at each doubling its amax jumps about 2x past the one
# step of history (amax_history = 1) the delayed scale was taken from.


@pytest.fixture(scope="module")
def spikes():
    return run_dynamics(FLOAT8_SPIKES, steps=12)


def test_delayed_scaling_saturates_the_step_after_a_jump_and_recovers(spikes):
    doubled = np.flatnonzero(np.diff(spikes.mixed_scale) > 0) + 1  # steps whose S just grew
    assert doubled.tolist() == [5, 10]
    saturated = spikes.mixed_saturated_share
    # Each jump saturates that one step (a plain cast would give inf there) ...
    assert np.all(saturated[doubled] > 0.01)
    # ... and the next step's scale has seen the new amax: nothing saturates elsewhere.
    assert np.count_nonzero(saturated) == doubled.size
    # A clipped gradient is still finite: the dynamic rule skips nothing, and training goes on.
    assert not spikes.mixed_skipped.any()
    assert np.all(np.diff(spikes.mixed_loss) < 0)
    assert spikes.mixed_loss[-1] == pytest.approx(spikes.float32_loss[-1], rel=0.1)


def test_the_pure_float8_run_stores_e4m3_weights_and_loses_updates(spikes):
    # E4M3 keeps 3 fraction bits: an update under 1/16 of a weight rounds away, which most of
    # this run's updates are; float32 masters lose none.
    assert spikes.pure_lost_share.mean() > 0.2 > spikes.mixed_lost_share.mean() == 0
    assert spikes.pure_loss[-1] > spikes.mixed_loss[-1]
