"""The Compare section's transformer panel (ui.tabs.architecture): its redraw reads the fields
or a config.json, its refusals name the field, and a pasted config.json fills the fields."""

from __future__ import annotations

import json

import gradio as gr
import pytest

from playground.core.recipes.registry import RECIPES
from playground.ui.tabs.architecture import MODEL_FIELDS, memory_event, read_pasted

GPT2 = json.dumps(
    {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
)


def test_the_redraw_counts_the_default_model_and_draws_a_bar_per_recipe():
    table, plot = memory_event(optimizer="adam")
    assert "1,235,814,400 parameters" in table
    assert "| **bytes per parameter** | **16** |" in table  # the ZeRO paper's 16 bytes
    figure = json.loads(plot.plot)
    assert [trace["x"] for trace in figure["data"]] == [list(RECIPES)] * len(figure["data"])


def test_a_config_json_replaces_the_fields():
    table, _ = memory_event(config_json=GPT2, hidden_size=4096)
    assert "gpt2 family, h = 768" in table and "124,439,808 parameters" in table


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("hidden_size", 0, "hidden_size (hidden size h) must be an integer in [1, 131072]"),
        ("num_key_value_heads", 5, "num_key_value_heads (key/value heads) must divide"),
        ("sequence_length", None, "sequence_length (sequence length s) is empty"),
        ("flash_attention", "on", "flash_attention (flash attention) must be true or false"),
        ("config_json", '{"n_embd": 768}', "n_layer is missing from config.json"),
        ("moments_dtype", "int4", "moments_dtype"),
    ],
)
def test_a_bad_value_is_refused_naming_it(field, value, words):
    with pytest.raises(gr.Error) as refused:
        memory_event(**{field: value})
    assert refused.value.message.startswith(words)


def test_a_pasted_config_json_fills_the_fields():
    fields = dict(zip(MODEL_FIELDS, read_pasted(GPT2), strict=True))
    assert fields["family"] == "gpt2" and fields["hidden_size"] == 768
    assert fields["intermediate_size"] == 4 * 768 and fields["tie_word_embeddings"] is True
    assert fields["max_position_embeddings"] == 1024
    # the fields it filled count the same model as the text itself
    assert memory_event(**fields)[0] == memory_event(config_json=GPT2)[0]
