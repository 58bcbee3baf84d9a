"""Pinned runs: kept per session (at most four, oldest dropped), named by what differs, drawn
beside the current run without drawing a shared curve twice."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import plotly.graph_objects as go
import pytest

from helpers import contrast, hex_rgb
from playground import StepConfig
from playground.core.runs.train import run_dynamics
from playground.sections.dynamics.charts import (
    dynamics_loss_figure,
    lost_update_figure,
    scale_figure,
)
from playground.sections.dynamics.curves import curves_of, value_text
from playground.sections.dynamics.pins import MAX_PINS, differing, names, pinned, pins_note
from scenarios import TINY_FLOAT16

TINY = TINY_FLOAT16.replace(steps=8)  # float16 data near 2^-12: S = 1 flushes its gradients


@pytest.fixture(scope="module")
def runs():
    """Float16 runs at S = 1 and S = 2^10; bfloat16 runs rounding to nearest and with Kahan."""
    return {
        "S=1": run_dynamics(TINY.replace(loss_scale=1.0)),
        "S=2^10": run_dynamics(TINY),
        # Data of scale 1 in bfloat16, where the pure run's rounding changes its curve.
        "nearest": run_dynamics(StepConfig(n=32, d_in=8, d_out=4, steps=8)),
        "kahan": run_dynamics(StepConfig(n=32, d_in=8, d_out=4, steps=8, pure_rounding="kahan")),
    }


def test_values_are_written_as_the_page_writes_them():
    assert [value_text(v) for v in (32768.0, 1.0, 0.1, 2.0**24, 1e-3, "kahan", 8)] == [
        "32768",
        "1",
        "0.1",
        "16777216",
        "0.001",
        "kahan",
        "8",
    ]


def test_at_most_four_pins_are_kept_oldest_dropped_and_a_repeat_replaces_its_pin(runs):
    # Pins keep only settings and curves: one run's curves under six learning rates will do.
    base = curves_of(runs["S=1"])

    def with_lr(lr: float):
        return dataclasses.replace(base, settings=dict(base.settings) | {"lr": str(lr)})

    seen = [base, *(with_lr(lr) for lr in (0.01, 0.02, 0.03, 0.04, 0.05))]
    pins: tuple = ()
    for run in seen:
        pins = pinned(pins, run)
    assert MAX_PINS >= 4 and pins == tuple(seen[-MAX_PINS:])
    again = with_lr(0.03)
    repinned = pinned(pins, again)
    assert len(repinned) == len(pins) and repinned[-1] is again
    assert [p.settings["lr"] for p in repinned] == ["0.02", "0.04", "0.05", "0.03"]


def test_runs_are_named_by_the_settings_that_differ(runs):
    one, big, kahan = (curves_of(runs[k]) for k in ("S=1", "S=2^10", "kahan"))
    assert differing([one, big]) == ["loss_scale"]
    assert names(big, [one]) == ("loss scale = 1024", ["loss scale = 1"])
    assert names(kahan, [curves_of(runs["nearest"])]) == (
        "pure-run rounding = kahan",
        ["pure-run rounding = nearest"],
    )
    tiny = "input scale = 0.000244140625, target scale = 0.000244140625"
    # Both at the default S = 1024: the data, the dtype and the rounding differ, in table order.
    assert names(kahan, [big])[1] == [
        f"{tiny}, compute dtype = float16, pure-run rounding = nearest"
    ]
    assert names(big, [big]) == ("same settings", ["same settings"])


def _figure(figure: dict) -> dict:
    go.Figure(figure)  # raises on an invalid property
    return json.loads(json.dumps(figure, allow_nan=False))  # strict JSON, as the page gets it


def _y(values: np.ndarray) -> list:
    return [float(v) if np.isfinite(v) else None for v in values]


def test_a_pinned_loss_scale_is_drawn_beside_the_current_run_in_a_group_named_by_it(runs):
    one, big = runs["S=1"], runs["S=2^10"]
    figure = _figure(dynamics_loss_figure(big, [curves_of(one)]))
    groups = {t["legendgrouptitle"]["text"] for t in figure["data"]}
    assert groups == {"this run: loss scale = 1024", "pinned: loss scale = 1"}
    pinned_traces = [t for t in figure["data"] if t["legendgroup"] == "pin0"]
    by_name = {t["name"]: t["y"] for t in pinned_traces}
    # The float32 run has no loss scale: its curve is the same, drawn once (the current run's).
    assert np.array_equal(one.float32_loss, big.float32_loss)
    assert not any(name == "float32" for name in by_name)
    assert by_name["mixed (float16, float32 masters)"] == _y(one.mixed_loss)
    assert figure["layout"]["legend"]["yref"] == "container"  # below the plot, under the title
    meter = _figure(lost_update_figure(big, [curves_of(one)]))
    pinned_meter = [t for t in meter["data"] if t.get("legendgroup") == "pin0"]
    assert pinned_meter and all(t["legendgrouptitle"]["text"] == "pinned: loss scale = 1"
                                for t in pinned_meter)  # fmt: skip
    top = meter["layout"]["yaxis"]["range"][1]
    assert top >= 100 * max(one.pure_lost_share.max(), one.mixed_lost_share.max())
    scale = _figure(scale_figure(big, [curves_of(one)]))
    (pinned_scale,) = [t for t in scale["data"] if t.get("legendgroup") == "pin0"]
    assert pinned_scale["y"] == pytest.approx(np.log2(one.mixed_scale).tolist())


def test_a_pinned_rounding_draws_only_the_pure_curve_it_changes(runs):
    nearest, kahan = runs["nearest"], runs["kahan"]
    figure = _figure(dynamics_loss_figure(kahan, [curves_of(nearest)]))
    pinned_names = [t["name"] for t in figure["data"] if t["legendgroup"] == "pin0"]
    assert pinned_names == ["pure bfloat16 parameters (round-to-nearest)"]
    title = {t["legendgrouptitle"]["text"] for t in figure["data"] if t["legendgroup"] == "pin0"}
    assert title == {"pinned: pure-run rounding = nearest"}
    note = pins_note(curves_of(kahan), [curves_of(nearest)])
    assert "pin 1: pure-run rounding = nearest" in note
    assert "its float32 and mixed loss curve is this run's" in note


def test_without_pins_the_figures_have_no_groups(runs):
    figure = dynamics_loss_figure(runs["S=1"])
    assert all("legendgroup" not in t for t in figure["data"])
    assert [t["name"] for t in figure["data"]][:3] == [
        "float32",
        "mixed (float16, float32 masters)",
        "pure float16 parameters (round-to-nearest)",
    ]


def test_a_pin_whose_curves_are_all_the_current_runs_still_names_itself(runs):
    one = runs["S=1"]
    figure = _figure(dynamics_loss_figure(one, [curves_of(one)]))
    pinned_traces = [t for t in figure["data"] if t["legendgroup"] == "pin0"]
    assert [t["name"] for t in pinned_traces] == ["same curves as this run"]
    assert pinned_traces[0]["legendgrouptitle"]["text"] == "pinned: same settings"


def test_each_pin_colour_is_a_line_of_three_to_one_on_the_light_and_dark_charts():
    from playground.sections.dynamics.pins import PIN_COLORS
    from playground.views.plotly import CHART_BACKGROUND, DARK_BACKGROUND

    assert len(set(PIN_COLORS)) == len(PIN_COLORS) >= MAX_PINS
    for background in (CHART_BACKGROUND, DARK_BACKGROUND):
        for color in PIN_COLORS:
            assert contrast(hex_rgb(color), hex_rgb(background)) >= 3.0, (color, background)


def test_a_long_pinned_run_is_drawn_with_fewer_points_from_its_first_to_its_last(runs):
    from playground.sections.dynamics.charts import PIN_POINTS

    base = curves_of(runs["S=1"])
    steps = 1000
    falling = np.geomspace(1.0, 1e-3, steps + 1)
    long = dataclasses.replace(
        base,
        steps=steps,
        float32_loss=falling,
        mixed_loss=falling * 1.5,
        pure_loss=falling * 2,
        mixed_scale=np.ones(steps),
        pure_scale=np.ones(steps),
        mixed_skipped=np.zeros(steps, bool),
        mixed_lost_share=np.linspace(0, 0.5, steps),
        pure_lost_share=np.linspace(0, 0.9, steps),
        mixed_saturated_share=np.zeros(steps),
    )
    pin = dataclasses.replace(long, settings=dict(long.settings) | {"lr": "9"},
                              mixed_loss=falling * 3)  # fmt: skip
    figure = _figure(dynamics_loss_figure(long, [pin]))
    current_mixed = figure["data"][1]
    assert len(current_mixed["x"]) == steps + 1  # the current run at full resolution
    (pinned_mixed,) = [t for t in figure["data"] if t["legendgroup"] == "pin0"]
    assert len(pinned_mixed["x"]) <= PIN_POINTS
    assert pinned_mixed["x"][0] == 0 and pinned_mixed["x"][-1] == steps
    for x, y in zip(pinned_mixed["x"], pinned_mixed["y"], strict=True):
        assert y == pytest.approx(3 * falling[x])


def test_a_pinned_runs_flushed_share_is_drawn_on_the_meter_beside_this_runs(runs):
    one, big = curves_of(runs["S=1"]), curves_of(runs["S=2^10"])
    # The float16 runs at S = 1 and S = 2^10 round away the same updates but flush different ones.
    assert one.mixed_flushed_share.max() > 0.5 > big.mixed_flushed_share.max()
    meter = _figure(lost_update_figure(big, [one]))
    pinned_meter = {t["name"]: t["y"] for t in meter["data"] if t.get("legendgroup") == "pin0"}
    assert "same curves as this run" not in pinned_meter
    flushed = pinned_meter["float32 masters: gradient flushed to 0"]
    assert flushed == pytest.approx((100 * one.mixed_flushed_share).tolist())
    assert meter["layout"]["yaxis"]["range"][1] >= 100 * one.mixed_flushed_share.max()
    # The other way round: the pinned S = 2^10 run flushed nothing, so its line lies at 0.
    back = _figure(lost_update_figure(one, [big]))
    names_back = [t["name"] for t in back["data"] if t.get("legendgroup") == "pin0"]
    assert "same curves as this run" not in names_back


def test_pins_are_named_only_by_the_settings_in_which_they_differ_from_this_run(runs):
    one, big = curves_of(runs["S=1"]), curves_of(runs["S=2^10"])
    kahan = curves_of(runs["kahan"])
    # Two pins: the S = 1 run differs from this one (S = 2^10) in its loss scale alone, though
    # the kahan pin differs in its data, dtype and rounding too.
    current_name, pin_names = names(big, [one, kahan])
    assert pin_names[0] == "loss scale = 1"
    assert pin_names[1].startswith("input scale = ") and "loss scale" not in pin_names[1]
    assert current_name.startswith("loss scale = 1024, input scale = ")
    note = pins_note(big, [one, kahan])
    assert note.splitlines()[1].startswith("- pin 1: loss scale = 1 (its float32")


def test_the_meters_dotted_lines_are_told_apart_by_their_dash(runs):
    one = curves_of(runs["S=1"])
    meter = _figure(lost_update_figure(one))
    dashes = {t["name"]: t["line"]["dash"] for t in meter["data"] if "flushed to 0" in t["name"]}
    assert len(dashes) == 2 and len(set(dashes.values())) == 2, dashes
