"""/compare's inputs: /step's, read from the same settings table, then the two sizes of the
user's own model, as the table of input orders on the calling page (docs/calling.md) says."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from playground.core.compare.memory import SIZE_FIELDS
from playground.ui.arguments import STEP
from playground.ui.endpoints import run_step
from playground.ui.tabs.compare import COMPARE, run_compare

CALLING = (Path(__file__).resolve().parents[3] / "docs" / "calling.md").read_text()


def test_compare_takes_the_steps_inputs_then_the_sizes():
    assert COMPARE.order == (*STEP.order, *SIZE_FIELDS)
    step = list(inspect.signature(run_step).parameters)
    compare = inspect.signature(run_compare).parameters
    assert list(compare) == [*step, "param_count", "tokens_per_batch"]
    assert [compare[name].default for name in SIZE_FIELDS] == [0, 0]
    row = re.search(r"^/compare +(.*)$", CALLING, re.M)
    assert row and row.group(1) == "/step's inputs, then param_count, tokens_per_batch"


def test_the_page_sends_compare_the_very_controls_step_reads():
    from playground.ui.page import build_demo

    demo = build_demo()
    config = demo.config if isinstance(demo.config, dict) else demo.get_config_file()
    endpoints = {dep.get("api_name"): dep for dep in config["dependencies"]}
    step, compare = endpoints["step"]["inputs"], endpoints["compare"]["inputs"]
    assert compare[: len(step)] == step and len(compare) == len(step) + len(SIZE_FIELDS)
    ids = {component["id"]: component["props"].get("elem_id") for component in config["components"]}
    assert [ids[index] for index in compare[len(step) :]] == list(SIZE_FIELDS)
    assert len(endpoints["compare"]["outputs"]) == 5
