"""A transformer's shape from a Hugging Face config.json (core.compare.architecture): a
hand-written Llama-like file and GPT-2's own, their weights' shapes and parameter counts
counted here by hand, and bad fields refused with the field named as the file names it."""

from __future__ import annotations

import json

import pytest
from hub_configs import GPT2, LLAMA_1B

from playground.core.bounds import ConfigError
from playground.core.compare.architecture import architecture, parse_config_json


def test_a_llama_config_json():
    model = parse_config_json(LLAMA_1B)
    assert (model.family, model.hidden_size, model.num_hidden_layers) == ("llama", 2048, 16)
    assert (model.num_attention_heads, model.num_key_value_heads, model.head_width) == (32, 8, 64)
    assert model.tie_word_embeddings and not model.dropout
    h, kv, i, vocab, layers = 2048, 8 * 64, 8192, 128256, 16
    # q, k, v fused in one GEMM; gate and up fused in fc1 (TransformerEngine's layers)
    shapes = {w.name: w.shape for w in model.weights if w.quantized}
    assert shapes == {
        "qkv": (h, h + 2 * kv),
        "proj": (h, h),
        "fc1": (h, 2 * i),
        "fc2": (i, h),
    }
    layer = h * (h + 2 * kv) + h * h + 3 * h * i + 2 * h  # two RMSNorm weights
    assert model.parameters == layers * layer + vocab * h + h  # tied head, final norm
    assert model.parameters == 1_235_814_400  # Llama 3.2 1B's published count
    untied = parse_config_json(LLAMA_1B.replace('"tie_word_embeddings": true', '"x": 0'))
    assert untied.parameters == model.parameters + vocab * h


def test_gpt2s_config_json_and_its_published_parameter_count():
    model = parse_config_json(GPT2)
    assert (model.family, model.hidden_size, model.num_attention_heads) == ("gpt2", 768, 12)
    assert model.num_key_value_heads == 12 and model.intermediate_size == 4 * 768  # n_inner: 4h
    assert model.tie_word_embeddings and model.dropout
    h, layers = 768, 12
    layer = (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h) + 4 * h
    assert model.parameters == layers * layer + 50257 * h + 1024 * h + 2 * h
    assert model.parameters == 124_439_808  # GPT-2 small's count (tied head)


def test_the_fields_on_their_own_make_the_same_model():
    fields = {
        "family": "llama",
        "hidden_size": 2048,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 0,
        "intermediate_size": 8192,
        "vocab_size": 128256,
        "tie_word_embeddings": True,
        "dropout": False,
    }
    assert architecture(fields).weights == parse_config_json(LLAMA_1B).weights


def _with(text: str, **changes) -> str:
    config = json.loads(text)
    for key, value in changes.items():
        if value is ...:
            del config[key]
        else:
            config[key] = value
    return json.dumps(config)


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        (_with(LLAMA_1B, hidden_size=0), "hidden_size", "must be an integer in [1, 131072]; got 0"),
        (_with(LLAMA_1B, num_hidden_layers=2.5), "num_hidden_layers", "an integer in [1, 4096]"),
        (_with(LLAMA_1B, num_key_value_heads=5), "num_key_value_heads", "must divide"),
        (
            _with(LLAMA_1B, intermediate_size=...),
            "intermediate_size",
            "is missing from config.json",
        ),
        (_with(LLAMA_1B, tie_word_embeddings="yes"), "tie_word_embeddings", "true or false"),
        (_with(LLAMA_1B, attention_dropout=1.5), "attention_dropout", "in [0, 1]; got 1.5"),
        (_with(LLAMA_1B, vocab_size="128256"), "vocab_size", "must be an integer in"),
        (_with(GPT2, n_head=7), "n_head", "must divide n_embd (768)"),
        (_with(GPT2, n_embd=-768), "n_embd", "n_embd (hidden size h) must be an integer"),
        (_with(GPT2, n_positions=...), "n_positions", "is missing from config.json"),
        ('{"d_model": 512}', "config_json", "neither hidden_size"),
        ("[1, 2]", "config_json", "must be a JSON object"),
        ("{not json", "config_json", "is not JSON"),
        ("x" * 100_001, "config_json", "at most 100,000 characters"),
    ],
)
def test_bad_fields_are_refused_by_name(text, field, words):
    with pytest.raises(ConfigError) as refused:
        parse_config_json(text)
    assert refused.value.field == field
    assert str(refused.value).startswith(field) or field == "config_json"
    assert words in str(refused.value)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("hidden_size", 0, "hidden_size (hidden size h) must be an integer in [1, 131072]"),
        (
            "num_attention_heads",
            3,
            "num_attention_heads (attention heads a) must divide hidden_size",
        ),
        ("family", "mamba", "family (family) must be one of llama, gpt2"),
        ("dropout", 1, "dropout (dropout) must be true or false"),
    ],
)
def test_bad_fields_on_their_own_are_refused_by_name(field, value, words):
    with pytest.raises(ConfigError) as refused:
        architecture({field: value})
    assert refused.value.field == field and str(refused.value).startswith(words)
