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


def test_the_flushed_share_says_it_is_the_whole_runs_and_gives_the_second_halfs_beside_it():
    import dataclasses

    dynamics = run_dynamics(TINY_FLOAT16.replace(loss_scale=2.0**20), 8, "static")
    # The training lessons quote the second half's share (74% at S = 1), this bullet the whole
    # run's (40%): a share that grows over the run gets both, each named.
    growing = np.repeat([0.0, 0.5], 4)
    reading = dynamics_summary(dataclasses.replace(dynamics, mixed_flushed_share=growing))[
        "reading"
    ]
    sentence = next(s for s in reading if "underflowed to zero" in s)
    whole, late = f"{growing.mean():.1%}", f"{growing[4:].mean():.1%}"
    assert f"averaged over all 8 steps, {whole} ({late} over the second half) of the mixed" in (
        sentence
    )
