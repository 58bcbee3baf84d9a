"""The memory ledger (core.compare.memory), every byte counted here by hand from the formats'
bit widths (ml_dtypes' finfo) and the recipes' published blocks: MXFP8's 32 values per E8M0
scale along the contraction (so the backward pass, which contracts the other axis of a weight,
needs a second copy), FP8 blocks' 128 x 128 weight tiles with float32 scales, NVFP4's 16 x 16
weight tiles with E4M3 scales and one float32 tensor scale; per-tensor float8's one float32
scale and, under delayed scaling, an amax history per role."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from playground.core.bounds import ConfigError
from playground.core.compare.memory import memory_ledger
from playground.core.recipes.registry import RECIPES
from playground.core.settings.settings import StepConfig

# An MLP whose widths are no multiple of any block: 40 -> 24 -> 10, N = 50.
MLP = {"model": "mlp", "hidden_layers": 1, "hidden_width": 24, "d_in": 40, "d_out": 10, "n": 50}
KERNELS = [(40, 24), (24, 10)]
ENTRIES = 40 * 24 + 24 + 24 * 10 + 10


def bits(name: str) -> int:
    return ml_dtypes.finfo(np.dtype(getattr(ml_dtypes, name, name))).bits


# Per recipe: (element format, scale format, forward weight tile, backward weight tile, tensor
# scale); None for a plain cast.
BLOCKS = {
    "bfloat16": None,
    "float16": None,
    "float8": ("float8_e4m3fn", "float32", None, None, False),
    "mxfp8": ("float8_e4m3fn", "float8_e8m0fnu", (32, 1), (1, 32), False),
    "fp8_block": ("float8_e4m3fn", "float32", (128, 128), (128, 128), False),
    "nvfp4": ("float4_e2m1fn", "float8_e4m3fn", (16, 16), (16, 16), True),
}
BATCH_BLOCK = {"mxfp8": 32, "fp8_block": 128, "nvfp4": 16}


def tiles(shape, tile):
    return math.ceil(shape[0] / tile[0]) * math.ceil(shape[1] / tile[1])


def by_hand(name: str, optimizer: str, moments: str = "float32", history: int = 0) -> dict:
    """(bytes of the parameters' parts, activation bytes) for the MLP above."""
    low = "float32" if BLOCKS[name] else name
    state = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    parts = {
        "working_weights": 0 if low == "float32" else ENTRIES * bits(low) / 8,
        "gradients": ENTRIES * bits(low) / 8,
        "master_weights": ENTRIES * 4,
        "optimizer_state": state * ENTRIES * bits(moments) / 8,
        "quantized_weights": 0,
        "weight_scales": 0,
        "transposed_weights": 0,
        "amax_history": 0,
    }
    activations = 50 * 40 * bits(low) / 8 + 50 * 24 * bits(low) / 8 + 50 * 24 * bits(low) / 8
    if BLOCKS[name]:
        element, scale, forward, backward, two_level = BLOCKS[name]
        activations = 50 * 24 * 4  # the hidden pre-activation, float32
        for shape in KERNELS:
            parts["quantized_weights"] += math.ceil(shape[0] * shape[1] * bits(element) / 8)
            if forward is None:
                parts["weight_scales"] += 4
                parts["amax_history"] += 3 * history * 4
            else:
                parts["weight_scales"] += tiles(shape, forward) * bits(scale) / 8 + 4 * two_level
                if backward != forward:
                    elements = math.ceil(shape[0] * shape[1] * bits(element) / 8)
                    parts["transposed_weights"] += (
                        elements + tiles(shape, backward) * bits(scale) / 8
                    )
        for fan_in in (40, 24):  # each dense layer's input, as the backward pass keeps it
            activations += math.ceil(50 * fan_in * bits(element) / 8)
            if forward is None:
                activations += 4
            else:
                column = (BATCH_BLOCK[name], 1)
                activations += tiles((50, fan_in), column) * bits(scale) / 8 + 4 * two_level
    return parts, activations


def test_the_table_here_knows_every_recipe():
    assert set(BLOCKS) == set(RECIPES)


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("name", list(RECIPES))
def test_every_part_by_hand(name, optimizer):
    ledger = memory_ledger(StepConfig(**MLP, optimizer=optimizer), RECIPES[name])
    parts, activations = by_hand(name, optimizer)
    assert ledger.parameters == ENTRIES and ledger.tokens == 50
    assert ledger.parts == pytest.approx(parts)
    assert ledger.activations == pytest.approx(activations)
    assert ledger.bytes_per_param == pytest.approx(sum(parts.values()) / ENTRIES)


def test_delayed_float8_keeps_an_amax_history():
    config = StepConfig(**MLP, fp8_scaling="delayed", amax_history=16)
    ledger = memory_ledger(config, RECIPES["float8"])
    assert ledger.parts == pytest.approx(by_hand("float8", "sgd", history=16)[0])
    assert ledger.parts["amax_history"] == 2 * 3 * 16 * 4


def test_the_zero_papers_sixteen_bytes_and_twelve_with_bfloat16_moments():
    config = StepConfig(optimizer="adam")
    assert memory_ledger(config, RECIPES["bfloat16"]).bytes_per_param == 2 + 2 + 4 + 4 + 4
    # the optimizer state's dtype is the config's moments_dtype, where the config has one
    object.__setattr__(config, "moments_dtype", "bfloat16")
    assert memory_ledger(config, RECIPES["bfloat16"]).bytes_per_param == 2 + 2 + 4 + 2 + 2
    assert memory_ledger(config, RECIPES["nvfp4"]).parts == pytest.approx(
        by_hand_default("nvfp4", config)
    )


def by_hand_default(name: str, config: StepConfig) -> dict:
    """The default linear model's parts (64 x 16 kernel, 1,040 entries) under ``config``."""
    entries = 64 * 16 + 16
    return {
        "working_weights": 0,
        "gradients": entries * 4,
        "master_weights": entries * 4,
        "optimizer_state": 2 * entries * bits(config.moments_dtype) / 8,
        "quantized_weights": 64 * 16 * bits("float4_e2m1fn") / 8,
        "weight_scales": (64 // 16) * (16 // 16) * bits("float8_e4m3fn") / 8 + 4,
        "transposed_weights": 0,
        "amax_history": 0,
    }


def test_a_users_size_scales_the_ledger():
    config = StepConfig(**MLP, optimizer="adam")
    own = memory_ledger(config, RECIPES["mxfp8"])
    scaled = memory_ledger(config, RECIPES["mxfp8"], param_count=7 * 10**9, tokens_per_batch=4096)
    assert scaled.parameters == 7 * 10**9 and scaled.tokens == 4096
    assert scaled.bytes_per_param == pytest.approx(own.bytes_per_param)
    assert scaled.parameter_bytes == pytest.approx(own.bytes_per_param * 7 * 10**9)
    assert scaled.activations == pytest.approx(own.activations / 50 * 4096)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("param_count", -1),
        ("param_count", 1.5),
        ("param_count", 10**14),
        ("param_count", None),
        ("tokens_per_batch", 2**33),
        ("tokens_per_batch", "4096"),
    ],
)
def test_bad_sizes_are_refused_by_name(field, value):
    with pytest.raises(ConfigError, match=rf"^{field} \(") as refused:
        memory_ledger(StepConfig(), RECIPES["bfloat16"], **{field: value})
    assert refused.value.field == field
