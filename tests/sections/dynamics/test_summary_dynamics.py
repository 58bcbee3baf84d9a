"""The training-dynamics reading (playground.sections.dynamics.summary)."""

from playground.core.runs.train import run_dynamics
from playground.sections.dynamics.summary import dynamics_summary
from scenarios import FLOAT8_SPIKES


def test_the_float8_reading_names_the_saturated_steps():
    # Float8 with delayed scaling over one step of history: each doubling of S (dynamic, every
    # 5 steps) saturates that step's gradient cast (tests/core/runs/test_train_float8.py).
    config = FLOAT8_SPIKES
    reading = " ".join(dynamics_summary(run_dynamics(config, steps=12))["reading"])
    assert "saturated" in reading and "steps 5, 10" in reading
