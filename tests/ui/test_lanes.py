"""Which lane a request takes (``ui.launch.event_work``): its work, and a /step's long compile."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from cost_by_hand import compile_work_by_hand

from playground.core.settings.cost import step_work
from playground.core.settings.settings import StepConfig
from playground.ui.launch import LARGE_WORK, event_work

DEEP = {"n": 8, "d_in": 8, "d_out": 4, "model": "mlp", "hidden_layers": 8, "hidden_width": 8}


def _event(api_name: str, settings: dict) -> tuple[SimpleNamespace, list]:
    """An event whose input components are named by the settings' fields, and its inputs."""
    inputs = [SimpleNamespace(elem_id=name) for name in settings]
    return SimpleNamespace(api_name=api_name, inputs=inputs), list(settings.values())


def test_a_step_whose_compile_is_long_is_large_work_and_a_short_one_is_not():
    # a deep nvfp4 MLP at a tiny batch: next to no work, but seconds of compile (by
    # cost_by_hand: 0.45 + 0.4 + 9 x 0.48 x 2.2 = 10.35 s, over the first call's 3 s)
    deep = StepConfig(**DEEP, compute_dtype="nvfp4")
    assert step_work(deep) < LARGE_WORK
    fn, inputs = _event("step", DEEP | {"compute_dtype": "nvfp4"})
    assert event_work(fn, inputs) == step_work(deep) + compile_work_by_hand("step", deep)
    assert event_work(fn, inputs) > LARGE_WORK
    # the page's default step compiles in under a second: its work alone
    fn, inputs = _event("step", {"compute_dtype": "bfloat16"})
    assert event_work(fn, inputs) == step_work(StepConfig())


def test_a_comparison_is_every_recipes_step_and_their_compiles_together():
    """/compare at the page's defaults: each recipe's step compiles in under the first call's
    3 s, but the six together take longer (by cost_by_hand), so it computes in the large lane."""
    from playground.core.recipes.registry import RECIPES

    fn, inputs = _event("compare", {"compute_dtype": "bfloat16"})
    configs = [StepConfig(compute_dtype=name) for name in RECIPES]
    work = sum(step_work(config) for config in configs)
    compiles = sum(compile_work_by_hand("step", config) for config in configs)
    assert event_work(fn, inputs) == pytest.approx(work + compiles)
    assert work < LARGE_WORK < event_work(fn, inputs)


def test_the_transformer_memory_redraw_runs_no_step_so_it_is_no_work():
    """It reads the step's optimizer settings from the page's controls, but only counts bytes:
    priced as a step it could wait behind large work."""
    from playground.ui.tabs.architecture import MEMORY, memory_event

    values = {name: parameter.default for name, parameter in MEMORY.signature.parameters.items()}
    fn = SimpleNamespace(
        api_name="architecture_memory",
        fn=memory_event,
        inputs=[SimpleNamespace(elem_id=name) for name in values],
    )
    assert event_work(fn, list(values.values())) == 0.0
    step, inputs = _event("step", {"optimizer": "adam"})
    assert event_work(step, inputs) > 0  # the same settings in a step's event are its work
