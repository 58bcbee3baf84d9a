"""A loss that stopped moving is written to the 2 digits that hold across machines, with
"about"; any other loss to 4 (checked with the tests' own rounding rule, ``stated_figures``)."""

import numpy as np
import pytest
from stated_figures import states_loss, stopped

from playground.core.lessons.loss_figures import final_loss, loss_path, loss_ratio, update_share
from playground.core.lessons.loss_figures import stopped as code_stopped

STEPS = np.arange(151, dtype=np.float64)
# float32 at its floor: it converges by step 60 and then moves only in its last digits.
FLOOR = 2.3041e-12 + 1.3 * np.exp(-STEPS / 2.0) + 1e-17 * np.sin(STEPS)
# A run still falling: the last tenth moves it by far more than 1%.
FALLING = 2.0 * np.exp(-STEPS / 40.0)
# A run that just crosses the 1% line: 0.9% then 1.1% of its final value over the last tenth.
NEARLY = np.concatenate([np.ones(135), np.linspace(1.009, 1.0, 16)])
CROSSING = np.concatenate([np.ones(135), np.linspace(1.011, 1.0, 16)])


def _parts(text: str) -> tuple[bool, str]:
    return text.startswith("about "), text.removeprefix("about ").removesuffix(" x")


@pytest.mark.parametrize("curve", [FLOOR, FALLING, NEARLY, CROSSING, np.full(5, 0.5)])
def test_a_final_loss_is_written_to_the_digits_its_state_allows(curve):
    assert code_stopped(curve) == stopped(curve)
    said_about, figure = _parts(final_loss(curve))
    assert states_loss(said_about, figure, curve[-1], stopped(curve)), final_loss(curve)


def test_the_floor_is_about_and_two_digits_and_holds_across_the_measured_spread():
    assert final_loss(FLOOR) == "about 2.3e-12" and stopped(FLOOR) and not stopped(FALLING)
    assert stopped(NEARLY) and not stopped(CROSSING)
    first, final = loss_path(FLOOR).split(" -> ")
    assert states_loss(False, first, FLOOR[0], False) and final == final_loss(FLOOR)


@pytest.mark.parametrize(
    ("curve", "reference"), [(FALLING, FLOOR), (FLOOR, FALLING), (FALLING, 2 * FALLING)]
)
def test_a_ratio_is_about_when_either_loss_stopped_moving(curve, reference):
    said_about, figure = _parts(loss_ratio(curve, reference))
    at_floor = stopped(curve) or stopped(reference)
    assert states_loss(said_about, figure, curve[-1] / reference[-1], at_floor)
    assert loss_ratio(curve, reference).endswith(" x")


def test_non_finite_losses_are_written_as_they_are():
    diverged = np.array([1.0, 10.0, np.inf])
    assert final_loss(diverged) == "inf" and not stopped(diverged)
    assert loss_ratio(np.array([1.0, np.nan]), FALLING) == "nan x"
    assert loss_ratio(FALLING, np.array([1.0, 0.0])) == "inf x"


@pytest.mark.parametrize(
    ("share", "curve", "written"),
    [
        (0.40306, FLOOR, "40%"),  # a stopped run's count: whole percents
        (0.40306, FALLING, "40.3%"),
        (0.00005, FLOOR, "0%"),  # the same as none: another processor may count none
        (0.0, FLOOR, "0%"),
        (1.0, FLOOR, "100%"),
    ],
)
def test_a_share_of_a_stopped_runs_updates_is_whole_percents(share, curve, written):
    assert update_share(share, curve) == written
