"""The endpoints' input order: every input after each input that existed when it was added.

A positional call written at any time must keep its meaning, so a setting added from now on
(appended to LATE_FIELDS) must land after every input of every endpoint, /export's appended run
settings and framework included; the order of today's inputs is a prefix of tomorrow's.
"""

from __future__ import annotations

from playground.ui import arguments
from playground.ui.arguments import DYNAMICS, STEP, Arguments
from playground.ui.endpoints import EXPORT


def _with_new_setting(endpoint: Arguments, name: str) -> Arguments:
    return Arguments(
        (*endpoint.fields, name),
        endpoint.extras,
        endpoint.appended,
        endpoint.appended_after,
    )


def test_a_setting_added_later_comes_after_every_input(monkeypatch):
    monkeypatch.setattr(arguments, "LATE_FIELDS", (*arguments.LATE_FIELDS, "tomorrow"))
    for endpoint in (STEP, DYNAMICS, EXPORT):
        grown = _with_new_setting(endpoint, "tomorrow")
        assert grown.order == (*endpoint.order, "tomorrow")


def test_exports_run_settings_follow_the_step_inputs_they_were_appended_to():
    cut = STEP.order.index("nvfp4_hadamard") + 1  # the last setting when they were appended
    assert EXPORT.order[:cut] == STEP.order[:cut]
    run_settings = ("steps", "mode", "period", "pure_rounding", "framework")
    assert EXPORT.order[cut : cut + len(run_settings)] == run_settings
    assert EXPORT.order[cut + len(run_settings) :] == STEP.order[cut:]  # added since


def test_late_settings_keep_the_order_they_were_added_in():
    for endpoint in (STEP, DYNAMICS):
        late = endpoint.order[endpoint.order.index("data") + 1 :]
        assert late == tuple(name for name in arguments.LATE_FIELDS if name in late)
