"""The ``/compare`` endpoint on the launched app: through gradio_client and raw HTTP, its rows are
/step's own losses for each recipe, bit for bit, beside one float32 twin; its memory ledger
counts the bytes written out here; bad values are refused naming the field, and the server keeps
serving. The shape is the suite's 32 x 8 -> 4, compiled for every recipe by the other tests. A
real transformer's ledger (its config.json or fields, appended inputs) comes back under the JSON's
``architecture``, and a call that passes none gets the default model's."""

from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest
from client_calls import refusal

from http_calls import FIELDS, call, visitor
from playground.core.recipes.registry import RECIPES
from playground.core.settings.settings import defaults

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
VISITOR = visitor("203.0.113.61")
# /compare's inputs: /step's, then the user's model size (docs/calling.md).
ORDER = (*FIELDS["step"], "param_count", "tokens_per_batch")
DEFAULT_VALUES = defaults() | SMALL | {"data": None, "param_count": 0, "tokens_per_batch": 0}


def bits(name: str) -> int:
    return ml_dtypes.finfo(np.dtype(getattr(ml_dtypes, name, name))).bits


@pytest.fixture(scope="module")
def compared(client):
    return client.predict(**SMALL, api_name="/compare")


def test_each_row_is_steps_own_loss(client, compared):
    summary, reading, table, memory, _figure = compared
    rows = summary["recipes"]
    assert [row["recipe"] for row in rows] == list(RECIPES)
    assert len({row["float32_new"] for row in rows}) == 1
    for row in rows:
        _, step, *_ = client.predict(**SMALL, compute_dtype=row["recipe"], api_name="/step")
        assert row["mixed_new"] == step["losses"]["mixed_new"], row["recipe"]
        assert row["float32_new"] == step["losses"]["float32_new"]
        assert row["loss_error"] == row["mixed_new"] - row["float32_new"]
        assert f"| {row['recipe']} |" in table
    assert summary["closest"] in reading and f"Here {summary['closest']} is closest" in reading


def test_the_memory_ledger_by_hand(compared):
    summary = compared[0]
    ledger = {entry["recipe"]: entry for entry in summary["memory"]}
    entries = 8 * 4 + 4
    bfloat16 = ledger["bfloat16"]
    # SGD keeps no state: bfloat16 weights and gradients, float32 masters
    assert bfloat16["bytes_per_param"] == (2 * bits("bfloat16") + bits("float32")) / 8
    assert bfloat16["parameters"] == entries and bfloat16["tokens"] == 32
    # the batch's input, kept for the weight gradient, in bfloat16
    assert bfloat16["activation_bytes"] == 32 * 8 * bits("bfloat16") / 8
    nvfp4 = ledger["nvfp4"]
    # E2M1 elements, one E4M3 scale per 16 x 16 tile (one here), one float32 tensor scale
    assert nvfp4["parts"]["quantized_weights"]["bytes"] == 8 * 4 * bits("float4_e2m1fn") / 8
    assert nvfp4["parts"]["weight_scales"]["bytes"] == bits("float8_e4m3fn") / 8 + 4


def test_a_users_model_size_scales_it(client, compared):
    summary, *_ = client.predict(
        **SMALL, param_count=7 * 10**9, tokens_per_batch=4096, api_name="/compare"
    )
    for own, scaled in zip(compared[0]["memory"], summary["memory"], strict=True):
        assert scaled["parameters"] == 7 * 10**9 and scaled["tokens"] == 4096
        assert scaled["bytes_per_param"] == pytest.approx(own["bytes_per_param"])
        assert scaled["activation_bytes"] == pytest.approx(own["activation_bytes"] / 32 * 4096)


def test_raw_http_positionally_gives_the_clients_answer(app_url, compared):
    answer = call(app_url, "compare", [DEFAULT_VALUES[name] for name in ORDER], VISITOR)
    assert answer.kind == "complete", answer
    assert answer.payload[0]["recipes"] == compared[0]["recipes"]
    assert answer.payload[0]["memory"] == compared[0]["memory"]


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("param_count", -5, "param_count (parameter count) must be an integer in [0, "),
        ("tokens_per_batch", 0.5, "tokens_per_batch (tokens per batch) must be an integer"),
        ("n", 4096, "n (batch rows N) must be at most"),
    ],
)
def test_bad_values_are_refused_by_name_over_raw_http(app_url, field, value, words):
    values = DEFAULT_VALUES | ({"d_in": 1024, "d_out": 1024} if field == "n" else {})
    answer = call(app_url, "compare", [(values | {field: value})[name] for name in ORDER], VISITOR)
    assert answer.kind == "error" and answer.message.startswith(words), answer
    if field in defaults():  # a setting: the core's own refusal of it, word for word
        settings = {name: values[name] for name in defaults()} | {field: value}
        assert answer.message == refusal("compare", settings)
    assert call(app_url, "ping", [], VISITOR).payload == ["pong"]  # still serving


GPT2 = json.dumps(
    {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024}
)


def test_a_real_transformers_ledger_by_keyword(client, compared):
    summary, *_ = client.predict(
        **SMALL,
        optimizer="adam",
        config_json=GPT2,
        sequence_length=1024,
        micro_batch=2,
        recompute=True,
        api_name="/compare",
    )
    section = summary["architecture"]
    assert section["parameters"] == 124_439_808  # GPT-2 small
    assert section["setup"] | {"optimizer": "adam"} == section["setup"]
    ledgers = {entry["recipe"]: entry for entry in section["memory"]}
    assert list(ledgers) == list(RECIPES)
    assert ledgers["bfloat16"]["bytes_per_param"] == 2 + 2 + 4 + 4 + 4  # ZeRO's 16
    # full recomputation: each of the 12 layers keeps its 16-bit input, 2 s b h bytes
    assert ledgers["bfloat16"]["activations"]["layers"] == 12 * 2 * 1024 * 2 * 768
    # the toy's own ledger is still there, one entry per recipe
    assert [entry["recipe"] for entry in summary["memory"]] == list(RECIPES)
    # a call without the architecture inputs gets the default (1B Llama-like) model's
    assert compared[0]["architecture"]["parameters"] == 1_235_814_400


def test_a_bad_architecture_field_is_refused_by_name(client):
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError, match=r"n_head \(attention heads a\) must divide n_embd"):
        client.predict(
            **SMALL, config_json=GPT2.replace('"n_head": 12', '"n_head": 7'), api_name="/compare"
        )
    with pytest.raises(AppError, match=r"micro_batch \(micro-batch b\) must be an integer"):
        client.predict(**SMALL, micro_batch=0, api_name="/compare")
