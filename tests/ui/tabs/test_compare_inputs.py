"""/compare's inputs: /step's, read from the same settings table, then the two sizes of the
user's own model, then a real transformer's (its config.json, its fields, its training), as the
table of input orders on the calling page (docs/calling.md) says."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from playground.core.compare.memory import SIZE_FIELDS
from playground.ui.arguments import STEP
from playground.ui.endpoints import run_step
from playground.ui.tabs.architecture import ARCHITECTURE_INPUTS
from playground.ui.tabs.compare import COMPARE, run_compare

CALLING = (Path(__file__).resolve().parents[3] / "docs" / "calling.md").read_text()


def test_compare_takes_the_steps_inputs_then_the_sizes_then_the_architecture():
    architecture = [name for name, _ in ARCHITECTURE_INPUTS]
    assert architecture[:3] == ["config_json", "family", "hidden_size"]
    assert COMPARE.order == (*STEP.order, *SIZE_FIELDS, *architecture)
    step = list(inspect.signature(run_step).parameters)
    compare = inspect.signature(run_compare).parameters
    assert list(compare) == [*step, "param_count", "tokens_per_batch", *architecture]
    assert [compare[name].default for name in SIZE_FIELDS] == [0, 0]
    # every appended input has a default, so a positional call of /step's inputs still works
    assert [compare[name].default for name in architecture] == [
        value for _, value in ARCHITECTURE_INPUTS
    ]
    assert compare["config_json"].default == "" and compare["hidden_size"].default == 2048
    row = re.search(r"^/compare +(.*(?:\n {19}.*)*)", CALLING, re.M)
    said = " ".join(line.strip() for line in row.group(1).splitlines()) if row else ""
    assert said == "/step's inputs, then " + ", ".join(
        ["param_count", "tokens_per_batch", *architecture]
    )


def test_the_page_sends_compare_the_very_controls_step_reads():
    from playground.ui.page import build_demo

    demo = build_demo()
    config = demo.config if isinstance(demo.config, dict) else demo.get_config_file()
    endpoints = {dep.get("api_name"): dep for dep in config["dependencies"]}
    step, compare = endpoints["step"]["inputs"], endpoints["compare"]["inputs"]
    appended = [*SIZE_FIELDS, *(name for name, _ in ARCHITECTURE_INPUTS)]
    assert compare[: len(step)] == step and len(compare) == len(step) + len(appended)
    ids = {component["id"]: component["props"].get("elem_id") for component in config["components"]}
    assert [ids[index] for index in compare[len(step) :]] == appended
    assert len(endpoints["compare"]["outputs"]) == 5
