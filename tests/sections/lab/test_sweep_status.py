"""The sweep's stale banner: which settings differ from the controls, named with both values."""

from __future__ import annotations

from playground.core.settings.settings import StepConfig, defaults
from playground.sections.lab.sweep_status import RERUN_LABEL, stale_banner, stale_fields

RAN_WITH = StepConfig(**(defaults() | {"compute_dtype": "float16"})).to_dict()


def _controls(**changes):
    return defaults() | {"compute_dtype": "float16"} | changes


def test_a_sweep_matching_the_controls_has_no_banner():
    assert stale_fields(RAN_WITH, _controls()) == {}
    assert stale_banner(RAN_WITH, _controls()) == ""
    assert stale_banner(None, _controls()) == ""  # no sweep yet


def test_a_changed_control_names_the_value_the_sweep_ran_with_and_the_value_now():
    banner = stale_banner(RAN_WITH, _controls(compute_dtype="bfloat16", lr=0.01))
    assert "class='stale-banner'" in banner and RERUN_LABEL in banner
    then, now = banner.split("ran with ")[1].split("; the controls now say ")
    assert "compute dtype = float16" in then and "learning rate = 0.1" in then
    assert "compute dtype = bfloat16" in now and "learning rate = 0.01" in now
    assert "compute_dtype" not in banner and "`" not in banner


def test_values_the_table_reads_alike_are_not_a_change_and_invalid_ones_are():
    # The page sends numbers as it holds them: 32.0 for n = 32 is the same setting.
    assert stale_fields(RAN_WITH, _controls(n=float(RAN_WITH["n"]))) == {}
    assert set(stale_fields(RAN_WITH, _controls(lr=-1))) == {"lr"}
