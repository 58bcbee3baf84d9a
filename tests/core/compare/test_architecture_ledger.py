"""The ledger of a real transformer (core.compare.architecture_ledger) against the papers and
TransformerEngine's storage, every number computed here from the formula or the formats' bits:

(a) the ZeRO paper (Rajbhandari et al. 2020, section 3.1): mixed-precision Adam keeps
    2 + 2 + 4 + 4 + 4 = 16 bytes per parameter;
(b) Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
    section 4): a layer keeps s b h (34 + 5 a s / h) bytes at 16 bits without recomputation
    (4h MLP, dropout, no flash attention), 2 s b h with full recomputation; their GPT-3 175B
    row: s = 2048, h = 12288, a = 96, L = 96;
(c) an FP8 recipe keeps bfloat16 working weights beside its quantized copies (two per weight:
    rowwise and columnwise/transposed), bfloat16 gradients, and per-tensor FP8's amax history
    is a constant per GEMM, not a share of the parameters.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hub_configs import GPT3_175B, LLAMA_1B

from playground.core.bounds import ConfigError
from playground.core.compare.architecture import architecture, parse_config_json
from playground.core.compare.architecture_ledger import (
    TrainingSetup,
    architecture_ledger,
    architecture_memory,
)
from playground.core.recipes.registry import RECIPES


def bits(name: str) -> int:
    return ml_dtypes.finfo(np.dtype(getattr(ml_dtypes, name, name))).bits


def quantizing():
    return [entry for entry in RECIPES.values() if entry.quantizes]


def test_a_the_zero_papers_sixteen_bytes_per_parameter_on_llama_1b():
    model = parse_config_json(LLAMA_1B)
    ledger = architecture_ledger(model, RECIPES["bfloat16"], TrainingSetup(optimizer="adam"))
    bf16, fp32 = bits("bfloat16") // 8, bits("float32") // 8
    # bf16 weights + bf16 gradients + fp32 masters + Adam's two fp32 moments
    assert ledger.bytes_per_param == bf16 + bf16 + fp32 + fp32 + fp32 == 16
    assert ledger.parameter_bytes == 16 * 1_235_814_400
    assert ledger.parts["optimizer_state"] == 2 * fp32 * 1_235_814_400
    # bfloat16 moments: 2 + 2 + 4 + 2 + 2; momentum keeps one moment, SGD none
    for optimizer, moments, expected in [
        ("adam", "bfloat16", 12),
        ("momentum", "float32", 12),
        ("sgd", "float32", 8),
    ]:
        setup = TrainingSetup(optimizer=optimizer, moments_dtype=moments)
        assert architecture_ledger(model, RECIPES["bfloat16"], setup).bytes_per_param == expected


def paper_layer(s: int, b: int, h: int, a: int) -> float:
    """Korthikanti et al.'s bytes per layer, 16-bit, no recomputation (their equation 1)."""
    return s * b * h * (34 + 5 * a * s / h)


@pytest.mark.parametrize("micro_batch", [1, 2])
def test_b_megatrons_activation_formula_on_gpt3_175b(micro_batch):
    model = parse_config_json(GPT3_175B)
    s, b, h, a, layers, vocab = 2048, micro_batch, 12288, 96, 96, 50257
    plain = TrainingSetup(sequence_length=s, micro_batch=b, flash_attention=False)
    ledger = architecture_ledger(model, RECIPES["bfloat16"], plain)
    assert ledger.activations["layers"] == paper_layer(s, b, h, a) * layers
    assert ledger.activations["recomputed_layer"] == 0
    # the output layer (their section 4.2): final norm and head inputs 4sbh, fp32 logits
    # 4sbv; the embedding's dropout mask sbh
    assert ledger.activations["output_layer"] == 4 * s * b * h + 4 * s * b * vocab + s * b * h
    recomputed = architecture_ledger(
        model,
        RECIPES["bfloat16"],
        TrainingSetup(sequence_length=s, micro_batch=b, recompute=True, flash_attention=False),
    )
    assert recomputed.activations["layers"] == 2 * s * b * h * layers
    # and one layer's working set while it is recomputed
    assert recomputed.activations["recomputed_layer"] == paper_layer(s, b, h, a)
    assert recomputed.activations["output_layer"] == ledger.activations["output_layer"]


def test_b_a_llama_layer_with_flash_attention_by_hand():
    """SwiGLU, grouped-query attention, no dropout, flash attention: the paper's terms with
    the architecture's widths (gate and up kept for SwiGLU's backward, O and a float32
    log-sum-exp per head for flash attention's), at s = 4096, b = 1."""
    model = parse_config_json(LLAMA_1B)
    s, h, kv, i, a = 4096, 2048, 512, 8192, 32
    ledger = architecture_ledger(model, RECIPES["bfloat16"], TrainingSetup(sequence_length=s))
    attention = 2 * s * (h + h + h + kv + kv + h) + 4 * s * a  # norm, qkv in, q, k, v, O; lse
    mlp = 2 * s * (h + h + 2 * i + i)  # norm, fc1 in, gate and up, fc2 in
    assert ledger.activations["layers"] == 16 * (attention + mlp)
    assert ledger.activations["output_layer"] == 2 * s * h * 2 + 4 * s * 128256


def quantized_entries(model) -> int:
    """A layer's four GEMMs' entries, all layers (Llama: qkv, proj, fc1 gate+up, fc2)."""
    h, kv, i = model.hidden_size, model.key_value_width, model.intermediate_size
    return model.num_hidden_layers * (h * (h + 2 * kv) + h * h + h * 2 * i + i * h)


@pytest.mark.parametrize("recipe", quantizing(), ids=lambda entry: entry.name)
def test_c_fp8_rows_keep_bf16_weights_and_gradients_beside_two_quantized_copies(recipe):
    model = parse_config_json(LLAMA_1B)
    params, quantized = model.parameters, quantized_entries(model)
    ledger = architecture_ledger(model, recipe, TrainingSetup(optimizer="adam"))
    bf16 = bits("bfloat16") / 8
    assert ledger.parts["working_weights"] == params * bf16
    assert ledger.parts["gradients"] == params * bf16  # the wgrad GEMM's output
    assert ledger.parts["master_weights"] == params * 4
    assert ledger.parts["optimizer_state"] == params * 8
    # rowwise and columnwise (a transpose for per-tensor FP8 and FP8 blocks)
    assert ledger.parts["quantized_copies"] == 2 * quantized * bits(recipe.forward_format) / 8
    plain = architecture_ledger(model, RECIPES["bfloat16"], TrainingSetup(optimizer="adam"))
    assert ledger.bytes_per_param > plain.bytes_per_param


def test_c_mxfp8_keeps_rowwise_and_columnwise_copies_with_e8m0_scales_per_32():
    model = parse_config_json(LLAMA_1B)
    ledger = architecture_ledger(model, RECIPES["mxfp8"], TrainingSetup())
    quantized = quantized_entries(model)  # every dimension here is a multiple of 32
    e8m0 = bits("float8_e8m0fnu") / 8
    assert ledger.parts["quantized_copies"] == 2 * quantized * bits("float8_e4m3fn") / 8
    assert ledger.parts["scales_and_amax"] == 2 * quantized / 32 * e8m0


def test_c_block_recipes_scales_by_their_tiles():
    model = parse_config_json(LLAMA_1B)
    quantized, tensors = quantized_entries(model), 4 * 16
    fp8_block = architecture_ledger(model, RECIPES["fp8_block"], TrainingSetup())
    assert fp8_block.parts["scales_and_amax"] == 2 * quantized / (128 * 128) * 4  # float32
    nvfp4 = architecture_ledger(model, RECIPES["nvfp4"], TrainingSetup())
    assert nvfp4.parts["quantized_copies"] == 2 * quantized * bits("float4_e2m1fn") / 8
    # an E4M3 scale per 16 x 16 tile and a float32 tensor scale, per copy
    e4m3 = bits("float8_e4m3fn") / 8
    assert nvfp4.parts["scales_and_amax"] == 2 * (quantized / 256 * e4m3 + tensors * 4)


@pytest.mark.parametrize("history", [1, 16, 1024])
def test_c_the_amax_history_is_a_constant_per_gemm_whatever_the_parameters(history):
    small = architecture(
        {
            "hidden_size": 256,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "intermediate_size": 512,
            "vocab_size": 1000,
        }
    )
    large = parse_config_json(LLAMA_1B)  # 16 layers as well: the same 64 GEMMs
    setup = TrainingSetup(fp8_scaling="delayed", amax_history=history)
    gemms = 4 * 16
    # TransformerEngine's fp8_meta per GEMM: 5 roles (forward input, weight, output; backward
    # grad output, grad input), each an amax history, a scale and its inverse in float32; one
    # float32 scale per copy of the weight (two copies)
    expected = gemms * (5 * (history + 2) * 4 + 2 * 4)
    for model in (small, large):
        assert architecture_ledger(model, RECIPES["float8"], setup).parts["scales_and_amax"] == (
            expected
        )
    assert expected < 1.4e6  # 1.3 MB at TransformerEngine's default history of 1024
    current = TrainingSetup(fp8_scaling="current")
    assert architecture_ledger(large, RECIPES["float8"], current).parts["scales_and_amax"] == (
        gemms * (5 * 3 * 4 + 2 * 4)
    )


def test_fp8_activations_keep_gemm_inputs_in_one_byte_plus_scales():
    """GPT-3 175B's layer under per-tensor FP8, no flash attention: the four GEMM inputs
    (2 + 2 + 2 + 8 of the paper's 34 sbh) at 1 byte plus one float32 scale each; MXFP8's at 1
    byte plus an E8M0 scale per 32 tokens."""
    model = parse_config_json(GPT3_175B)
    s, h, a = 2048, 12288, 96
    setup = TrainingSetup(sequence_length=s, flash_attention=False)
    float8 = architecture_ledger(model, RECIPES["float8"], setup)
    gemm_inputs = s * h * (1 + 1 + 1 + 4)
    assert float8.activations["layers"] == 96 * (
        paper_layer(s, 1, h, a) - 2 * gemm_inputs + gemm_inputs + 4 * 4
    )
    mxfp8 = architecture_ledger(model, RECIPES["mxfp8"], setup)
    assert mxfp8.activations["layers"] == 96 * (
        paper_layer(s, 1, h, a) - gemm_inputs + gemm_inputs / 32
    )


def test_every_recipe_has_a_ledger_in_the_registrys_order():
    ledgers = architecture_memory(parse_config_json(LLAMA_1B), TrainingSetup()).ledgers
    assert [ledger.recipe for ledger in ledgers] == list(RECIPES)
    row = ledgers[0].as_dict()
    assert row["bytes_per_param"] == pytest.approx(
        sum(part["bytes_per_param"] for part in row["parts"].values())
    )
    assert row["total_bytes"] == row["parameter_bytes"] + row["activation_bytes"]
    assert math.isclose(row["activation_bytes"], sum(row["activations"].values()))


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        (
            "sequence_length",
            0,
            "sequence_length (sequence length s) must be an integer in [1, 2^20]",
        ),
        ("micro_batch", 1.5, "micro_batch (micro-batch b) must be an integer"),
        ("recompute", "yes", "recompute (activation checkpointing) must be true or false"),
        ("optimizer", "lion", "optimizer (optimizer) must be one of"),
        ("moments_dtype", "int8", "moments_dtype"),
    ],
)
def test_bad_setup_fields_are_refused_by_name(field, value, words):
    with pytest.raises(ConfigError) as refused:
        TrainingSetup(**{field: value})
    assert refused.value.field == field and str(refused.value).startswith(words)
