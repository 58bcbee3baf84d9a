"""A commit answers a skip for each banner that cannot be on view (an update costs Gradio's
server a component rebuild and the browser a status walk, at every commit): the problems banner
(``#status``) once no problem is shown, the training run's stale banner before a run is shown,
the sweep's banner and rerun button before a sweep. Once there is something to be stale about,
every commit checks it as before."""

from __future__ import annotations

from types import SimpleNamespace

from helpers import step_inputs
from playground.core.settings.settings import settings
from playground.ui import page_events
from playground.ui.arguments import DYNAMICS, STEP
from playground.ui.components import Control
from playground.ui.tabs import dynamics, lab
from playground.ui.widgets import DEFAULTS

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
SKIP = {"__type__": "update"}


def _values(**changes) -> dict:
    """A commit's values by field: the defaults at a small shape, no upload, with ``changes``."""
    return STEP.values(step_inputs(STEP.order, data=None, **SMALL, **changes))


def test_the_problems_banner_is_left_alone_when_none_is_shown():
    answer = page_events.commit(_values(lr=0.2), {"lr": 0.1}, [])
    assert "status" not in answer and "headline" in answer


def test_the_problems_banner_shown_by_a_refused_commit_is_hidden_by_the_next_valid_one():
    refused = page_events.commit(_values(lr=-1.0), {"lr": 0.1}, [])
    assert refused["status"]["visible"] is True and refused["notices_shown"] == ["lr"]
    valid = page_events.commit(_values(lr=0.3), {"lr": 0.1}, refused["notices_shown"])
    assert valid["status"] == {"__type__": "update", "value": "", "visible": False}
    assert valid["notices_shown"] == []


def test_a_refused_value_is_named_in_its_controls_help_line_until_it_is_fixed():
    allowed = settings()["lr"].describe()
    refused = page_events.commit(_values(lr=-1.0), {"lr": 0.1}, [])
    shown = refused[Control("lr")]
    assert "lr" in shown["info"] and "got -1" in shown["info"] and allowed in shown["info"]
    assert shown["elem_classes"] == ["field-invalid"] and "value" not in shown
    fixed = page_events.commit(_values(lr=0.3), {"lr": 0.1}, refused["notices_shown"])[
        Control("lr")
    ]
    assert fixed["elem_classes"] == [] and fixed["info"].endswith(f"Allowed: {allowed}.")
    # A slider's refused value: the message says the slider is back at the shown value.
    values = _values() | {"n": 1e40}
    slider = page_events.commit(values, {"n": 64}, [])[Control("n")]
    assert slider["value"] == 64 and "back at 64" in slider["info"]
    assert slider["elem_classes"] == ["commit-slider", "field-invalid"]


def test_the_training_banner_is_a_skip_until_a_run_is_shown():
    assert dynamics.check_shown_run(*step_inputs(DYNAMICS.order, data=None), None) == SKIP
    # A run shown with another lr: the same check now names it.
    shown = SimpleNamespace(
        settings=dynamics.controls_settings(DYNAMICS.values(step_inputs(DYNAMICS.order, data=None)))
    )
    banner = dynamics.check_shown_run(
        *step_inputs(DYNAMICS.order, data=None, lr=DEFAULTS["lr"] * 2), shown
    )
    assert banner["visible"] is True and "Not updated" in banner["value"]
    assert (
        dynamics.check_shown_run(*step_inputs(DYNAMICS.order, data=None), shown)["visible"] is False
    )


def test_the_sweep_banner_and_rerun_button_are_skips_until_a_sweep_ran():
    controls = step_inputs(STEP.order, data=None)
    assert lab.sweep_commit_check(None, *controls) == (SKIP, SKIP)
    ran_with = STEP.values(controls) | {"lr": DEFAULTS["lr"] * 2}
    banner, rerun = lab.sweep_commit_check(ran_with, *controls)
    assert "Not updated" in banner and rerun.visible is True
    # The sweep's settings now: no banner, no rerun button.
    assert lab.sweep_commit_check(STEP.values(controls), *controls)[1].visible is False
