"""The training-dynamics charts: the lost-update meter's axis (the tab's hidden chart column is
tested beside the tab, in tests/ui/tabs/test_dynamics_endpoint.py)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from playground import StepConfig
from playground.core.runs.train import run_dynamics
from playground.sections.dynamics.charts import dynamics_loss_figure, lost_update_figure
from scenarios import FLOAT8_SPIKES

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
# Float8 with delayed scaling: the steps after each doubling of S saturate (test_train_float8.py).


@pytest.fixture(scope="module")
def dynamics():
    return run_dynamics(StepConfig(**SMALL), 12, "static", 100)


def test_lost_update_axis_follows_the_data_from_zero_in_percent(dynamics):
    figure = lost_update_figure(dynamics)
    yaxis = figure["layout"]["yaxis"]
    pure, masters, *flushed = figure["data"]
    # No fixed 0-100% range: the axis is fitted to the shares (often below 1%), with 0 a little
    # above its bottom so a run that loses nothing is not hidden on the x axis. The shares are
    # the rounded-away ones and (dotted) the updates lost to a flushed gradient.
    shares = (dynamics.pure_lost_share, dynamics.mixed_lost_share)
    shares += (dynamics.pure_flushed_share, dynamics.mixed_flushed_share)
    largest = 100 * max(share.max() for share in shares)
    assert len(flushed) == sum(share.any() for share in shares[2:])
    low, high = yaxis["range"]
    assert largest > 0 and low < 0 and largest < high <= 1.1 * largest
    assert -low < 0.1 * high
    assert yaxis["ticksuffix"] == "%"
    assert pure["y"] == pytest.approx((100 * dynamics.pure_lost_share).tolist())
    assert masters["y"] == pytest.approx((100 * dynamics.mixed_lost_share).tolist())
    assert all("% of entries" in trace["hovertemplate"] for trace in figure["data"])


def test_lost_update_axis_shows_zero_to_one_percent_when_nothing_is_lost(dynamics):
    nothing = dataclasses.replace(
        dynamics,
        pure_lost_share=np.zeros_like(dynamics.pure_lost_share),
        mixed_lost_share=np.zeros_like(dynamics.mixed_lost_share),
        pure_flushed_share=np.zeros_like(dynamics.pure_lost_share),
        mixed_flushed_share=np.zeros_like(dynamics.mixed_lost_share),
    )
    low, high = lost_update_figure(nothing)["layout"]["yaxis"]["range"]
    assert low < 0 < high and high == pytest.approx(1.08)


def test_loss_axis_labels_whole_values_at_one_two_five_unless_the_curve_spans_decades(dynamics):
    narrow = dynamics_loss_figure(dynamics)["layout"]["yaxis"]
    assert (narrow["type"], narrow["tickformat"], narrow["dtick"]) == ("log", "~g", "D2")
    falling = np.geomspace(1.0, 1e-8, dynamics.float32_loss.size)
    wide = dataclasses.replace(dynamics, float32_loss=falling)
    assert "dtick" not in dynamics_loss_figure(wide)["layout"]["yaxis"]  # Plotly's decades


@pytest.mark.parametrize(
    ("rounding", "words"), [("nearest", "round-to-nearest"), ("kahan", "Kahan summation")]
)
def test_the_pure_curves_name_their_rounding(rounding, words):
    report = run_dynamics(StepConfig(**SMALL, pure_rounding=rounding), 4, "static", 100)
    names = [t["name"] for t in dynamics_loss_figure(report)["data"]]
    assert names[2] == f"pure bfloat16 parameters ({words})"
    meter = lost_update_figure(report)
    assert meter["data"][0]["name"] == f"pure bfloat16 ({words})"
    assert "saturated" not in json.dumps(meter["data"])  # no float8, no saturation trace
    expected = "compensation buffer" if rounding == "kahan" else "p + delta == p"
    assert expected in meter["layout"]["title"]["text"]


@pytest.fixture(scope="module")
def spikes():
    return run_dynamics(FLOAT8_SPIKES, steps=12)


def test_the_meter_draws_the_saturated_share_beside_the_lost_updates(spikes):
    figure = lost_update_figure(spikes)
    (saturated,) = [t for t in figure["data"] if "saturated" in t["name"]]
    assert saturated["x"] == list(range(1, spikes.steps + 1))  # step k's share at update k + 1
    assert saturated["y"] == pytest.approx((100 * spikes.mixed_saturated_share).tolist())
    assert max(figure["layout"]["yaxis"]["range"]) > 100 * spikes.mixed_saturated_share.max()
