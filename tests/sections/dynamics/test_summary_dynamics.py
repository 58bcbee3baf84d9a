"""The training-dynamics reading (playground.sections.dynamics.summary)."""

from playground.core.runs.train import run_dynamics
from playground.sections.dynamics.summary import dynamics_summary
from scenarios import FLOAT8_SPIKES


def test_the_float8_reading_names_the_saturated_steps():
    # Float8 with delayed scaling over one step of history: each doubling of S (dynamic, every
    # 5 steps) saturates that step's gradient cast (tests/core/runs/test_train_float8.py): the
    # updates of index 5 and 10, which the charts' x axis draws at steps 6 and 11.
    config = FLOAT8_SPIKES
    summary = dynamics_summary(run_dynamics(config, steps=12))
    reading = " ".join(summary["reading"])
    assert summary["mixed_saturated_steps"] == [5, 10]  # indices of the per-step arrays
    assert "saturated" in reading and "steps 6, 11" in reading


def test_the_synthetic_regressions_floor_is_said_to_be_precisions_not_an_lms():
    """On the synthetic regression the reading says the gap is precision's floor and predicts no
    LM's loss gap; on a user's own data it does not (the sentence is about the toy)."""
    import numpy as np

    from playground.core.data.user_data import UserData
    from playground.core.settings.settings import StepConfig

    config = StepConfig(compute_dtype="bfloat16")
    said = " ".join(dynamics_summary(run_dynamics(config, steps=4))["reading"])
    assert "does not predict the loss gap of a language model" in said
    rng = np.random.default_rng(0)
    x = rng.standard_normal((config.n, config.d_in)).astype(np.float32)
    y = rng.standard_normal((config.n, config.d_out)).astype(np.float32)
    own = run_dynamics(config, steps=4, data=UserData("mine.csv", x, y))
    assert "language model" not in " ".join(dynamics_summary(own)["reading"])
