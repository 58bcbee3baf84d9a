"""The lost-update meter in the dynamics reading and JSON: flushed and rounded-away updates."""

import json

import numpy as np

from playground import StepConfig, run_dynamics
from playground.sections.dynamics.summary import dynamics_summary

TINY_FLOAT16 = StepConfig(
    n=32,
    d_in=8,
    d_out=4,
    compute_dtype="float16",
    input_scale=2.0**-24,
    target_scale=2.0**-24,
    loss_scale=1.0,
)


def test_s1_reading_says_where_the_updates_went():
    dynamics = run_dynamics(TINY_FLOAT16, 4, "static")
    summary = json.loads(json.dumps(dynamics_summary(dynamics), allow_nan=False))
    flushed = summary["mean_flushed_share"]
    assert flushed["mixed"] == float(np.mean(dynamics.mixed_flushed_share)) == 1.0
    assert flushed["pure"] == float(np.mean(dynamics.pure_flushed_share))
    # The rounded-away count keeps its key and meaning: nothing was left to round away.
    assert summary["mean_lost_share"]["mixed"] == 0.0
    assert set(summary["final_loss"]) == {"float32", "mixed", "pure"}
    reading = " ".join(summary["reading"])
    # Every update flushed, so the loss never moved: a stopped run's share, in whole percents.
    assert "100% of the mixed run's parameter updates per step" in reading
    assert "underflowed to zero in float16" in reading
