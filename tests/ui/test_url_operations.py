"""The URL carries the precision-per-operation settings like any other field, and the cross-field
rule (a norm only for a model with hidden activations) drops the norm with the core's message."""

from __future__ import annotations

from playground.core.settings.settings import settings
from playground.ui.url_state import read_query

FIELDS = list(settings())


def test_the_three_settings_read_from_the_query():
    query = {"precision_policy": "autocast", "task": "classification", "model": "mlp"}
    values, problems = read_query(query | {"norm": "layernorm"}, FIELDS)
    assert problems == []
    assert values == query | {"norm": "layernorm"}


def test_a_norm_without_the_mlp_is_dropped_by_name():
    values, problems = read_query({"norm": "layernorm", "task": "classification"}, FIELDS)
    assert values == {"task": "classification"}
    assert len(problems) == 1 and problems[0].startswith("norm (normalisation) must be none")


def test_an_unknown_preset_is_refused_with_its_choices():
    values, problems = read_query({"precision_policy": "fp32"}, FIELDS)
    assert values == {}
    assert "exercise, autocast, all_float32_but_matmul" in problems[0]
