"""The training charts say what happened: the loss axis is always labelled, also when the
curves barely move, and the meter shows the updates lost to flushed gradients.

The issue's case: 1,000 steps from 1.239e-07 to 1.235e-07, drawn over the whole height with no
tick label at all (a log axis's 1-2-5 ticks all fell outside it), so a 0.3% change looked like
a steep fall. Every label must be a number inside the curves' span, and tell its tick apart.
"""

from __future__ import annotations

import numpy as np
import pytest

from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import StepConfig
from playground.sections.dynamics.charts import dynamics_loss_figure, loss_ticks


@pytest.mark.parametrize("low, high", [(1.235e-7, 1.239e-7), (1.183e-7, 1.201e-7), (3.0, 3.0)])
def test_a_narrow_span_gets_labelled_ticks_inside_it(low, high):
    ticks = loss_ticks(np.array([high, (low + high) / 2, low]))
    labels = [float(text) for text in ticks["ticktext"]]
    assert ticks["tickmode"] == "array" and len(ticks["tickvals"]) == len(labels)
    assert len(set(ticks["ticktext"])) == len(labels)  # each label names its own tick
    assert labels == sorted(labels)
    for value, label in zip(ticks["tickvals"], labels, strict=True):
        assert low <= value <= high
        assert label == pytest.approx(value, rel=1e-3)


def test_wider_spans_keep_one_two_five_or_decade_ticks():
    assert loss_ticks(np.array([1.0, 30.0]))["dtick"] == "D2"
    assert "dtick" not in loss_ticks(np.array([1e-6, 1.0]))
    assert "tickvals" not in loss_ticks(np.array([1.0, 3.0]))


def test_the_chart_of_a_run_that_barely_moves_is_labelled():
    config = StepConfig(n=16, d_in=4, d_out=2, lr=1e-6, steps=5)
    figure = dynamics_loss_figure(run_dynamics(config))
    finite = np.concatenate([np.asarray(trace["y"], float) for trace in figure["data"]])
    finite = finite[np.isfinite(finite)]
    assert finite.max() < 2.5 * finite.min()  # the case: a loss that barely changes
    yaxis = figure["layout"]["yaxis"]
    assert yaxis["tickvals"] and min(yaxis["tickvals"]) >= finite.min() * (1 - 1e-12)


def test_the_meter_shows_updates_lost_to_flushed_gradients():
    """float16 at S = 1 on data so small that its gradients flush: the meter's dotted lines are
    the run's flushed shares (nothing was there to round away), named in the subtitle."""
    from playground.core.lessons import DYNAMICS_LESSONS
    from playground.sections.dynamics.charts import lost_update_figure

    lesson = next(
        lesson
        for lesson in DYNAMICS_LESSONS
        if lesson.overrides.get("compute_dtype") == "float16"
        and lesson.overrides.get("loss_scale") == 1.0
    )
    dynamics = lesson.run()
    figure = lost_update_figure(dynamics)
    dotted = [t for t in figure["data"] if t.get("line", {}).get("dash") == "dot"]
    assert dotted and "flushed to 0" in figure["layout"]["title"]["text"]
    mixed = next(t for t in dotted if t["name"].startswith("float32 masters"))
    expected = 100 * np.asarray(dynamics.mixed_flushed_share)
    assert np.allclose(mixed["y"], expected[np.asarray(mixed["x"]) - 1])
    assert max(mixed["y"]) > 10  # the stall: many updates lost before the optimizer
