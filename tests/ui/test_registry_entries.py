"""A recipe added to the registry reaches every part that reads the registry, with no other edit.

Two throwaway recipes are added to ``RECIPES`` for this module (monkeypatched, then removed): a
plain cast to float16 under a new name, with its own work and compile factors, and MXFP8's block
format under a new name, listed in the inspector's block list. Every registry-driven part must
pick them up: the settings table's choices and refusals, the API's ``compute_dtype`` choices and
the page's control (the Blocks built in-process, after the recipes were added), the lab's sweep
introduction and block list, and the cost model.
"""

from __future__ import annotations

import dataclasses
import math

import gradio as gr
import ml_dtypes
import numpy as np
import pytest

from playground.core.recipes.block_formats import MXFP8
from playground.core.recipes.registry import RECIPES, block_recipe, plain_recipe
from playground.core.settings.compile_cost import compile_seconds
from playground.core.settings.cost import pass_work, run_step_work
from playground.core.settings.settings import ConfigError, StepConfig, settings
from playground.sections.lab.block_list import block_list_view
from playground.ui.page import build_demo

PLAIN = "float16_copy"
BLOCK = "mxfp8_copy"
WORK_FACTOR = 3.0
COMPILE_FACTOR, COMPILE_EXTRA = 2.0, 0.5


@pytest.fixture(scope="module")
def demo():
    """The page built with the two throwaway recipes in the registry; they leave with it."""
    with pytest.MonkeyPatch.context() as patch:
        plain = dataclasses.replace(
            plain_recipe("float16"),
            name=PLAIN,
            work_factor=WORK_FACTOR,
            compile_cost=((COMPILE_FACTOR, COMPILE_EXTRA),) * 3,
        )
        patch.setitem(RECIPES, PLAIN, plain)
        spec = dataclasses.replace(MXFP8, name=BLOCK)
        patch.setitem(RECIPES, BLOCK, block_recipe(spec, 1.4, ((1.0, 0.0),) * 3, listed=True))
        yield build_demo()


def _component(demo, elem_id: str):
    return next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)


def test_the_settings_table_takes_and_names_the_new_recipes(demo):
    choices = settings()["compute_dtype"].choices
    assert list(choices)[-2:] == [PLAIN, BLOCK]
    assert StepConfig(compute_dtype=PLAIN).compute_dtype == PLAIN
    with pytest.raises(ConfigError, match=f"{PLAIN}, {BLOCK}; got 'missing'"):
        StepConfig(compute_dtype="missing")


def test_the_api_and_the_page_control_offer_the_new_recipes(demo):
    expected = list(RECIPES)
    assert expected[-2:] == [PLAIN, BLOCK]
    endpoints = demo.get_api_info()["named_endpoints"]
    for endpoint in ("/step", "/sweep", "/dynamics", "/export", "/downloads"):
        parameter = next(
            p for p in endpoints[endpoint]["parameters"] if p["parameter_name"] == "compute_dtype"
        )
        assert parameter["type"]["enum"] == expected, endpoint
    assert [value for _, value in _component(demo, "compute_dtype").choices] == expected


def test_the_recipes_own_settings_are_fields_with_controls_in_one_accordion(demo):
    declared = [name for entry in RECIPES.values() for name in entry.settings]
    assert declared and set(declared) <= set(settings())
    accordion = next(
        b
        for b in demo.blocks.values()
        if isinstance(b, gr.Accordion) and _component(demo, declared[0]) in _descendants(b)
    )
    controls = [getattr(b, "elem_id", None) for b in _descendants(accordion)]
    assert [name for name in controls if name in settings()] == list(dict.fromkeys(declared))


def _descendants(block) -> list:
    children = list(getattr(block, "children", []))
    return [item for child in children for item in (child, *_descendants(child))]


def test_the_lab_lists_the_new_recipes(demo):
    # The sweep runs up to the first power of two past float16's largest value.
    last = math.floor(math.log2(float(ml_dtypes.finfo(np.float16).max))) + 1
    intros = [b.value for b in demo.blocks.values() if isinstance(getattr(b, "value", None), str)]
    assert any(f"2^{last} for {PLAIN}" in text for text in intros)
    assert BLOCK in _component(demo, "inspect-list").info
    html = block_list_view("1, 1000")
    assert f"<strong>{BLOCK}</strong>" in html and f"{BLOCK} stored" in html
    assert f"<strong>{PLAIN}</strong>" not in html  # a plain cast has no blocks to list


def test_the_cost_model_prices_the_new_recipe_by_its_own_factors(demo):
    base, mine = (StepConfig(n=64, d_in=32, d_out=8, compute_dtype=d) for d in ("float16", PLAIN))
    matmuls = 64 * 32 * 8  # the linear model: N x D_in x D_out multiply-adds per pass
    assert pass_work(mine) - pass_work(base) == matmuls * (WORK_FACTOR - 1.0)
    assert run_step_work(mine) - run_step_work(base) == matmuls * (WORK_FACTOR - 1.0)
    for endpoint in ("step", "dynamics", "sweep"):
        one, two = (compile_seconds(endpoint, PLAIN, layers) for layers in (1, 2))
        reference_one, reference_two = (
            compile_seconds(endpoint, "bfloat16", layers) for layers in (1, 2)
        )
        # Each dense layer's part is scaled by the recipe's factor, and its extra added once.
        assert two - one == pytest.approx(COMPILE_FACTOR * (reference_two - reference_one))
        assert one - COMPILE_FACTOR * (reference_two - reference_one) == pytest.approx(
            reference_one - (reference_two - reference_one) + COMPILE_EXTRA
        )
