"""Each block recipe's shares of a tensor against numpy references written here with ml_dtypes'
casts: MXFP8 (E8M0 scales, blocks of 32), FP8 blocks (float32 scales, blocks of 128) and NVFP4
(E4M3 block scales under a float32 tensor scale, blocks of 16), blocks along the last axis; the
slices that keep one program per recipe change no count."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from playground.core.recipes.registry import RECIPES
from playground.core.tensors.blocks import SLICE_ROWS, SLICES, block_shares

BLOCK_RECIPES = {name: entry.block for name, entry in RECIPES.items() if entry.block is not None}
F32 = np.float32


def element_type(fmt: str) -> np.dtype:
    return np.dtype(getattr(ml_dtypes, fmt))


def quantized(values: np.ndarray, spec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(elements, dequantized float64, saturated) of ``values`` (float32, as rows along the last
    axis, zero-padded to whole blocks) by ``spec``'s rule, in numpy with ml_dtypes."""
    rows = values.reshape(-1, values.shape[-1] if values.ndim else 1).astype(F32)
    width = math.ceil(rows.shape[1] / spec.block) * spec.block
    blocks = np.zeros((rows.shape[0], width), F32)
    blocks[:, : rows.shape[1]] = rows
    blocks = blocks.reshape(-1, spec.block)
    info = ml_dtypes.finfo(element_type(spec.element_format))
    top = F32(info.max)
    amax = np.abs(blocks).max(axis=1)
    tensor = F32(1)
    if spec.scale_rule == "round_up":  # 2^ceil(log2(amax / max)), E8M0's range
        ratio = np.where(amax > 0, amax, top) / top
        exponent = np.clip(np.ceil(np.log2(ratio.astype(np.float64))), -127, 127)
        scaled = blocks.astype(np.float64) / np.exp2(exponent)[:, None]
        scale = np.exp2(exponent)
    elif spec.scale_rule == "float32":  # amax / max in float32
        scale = np.where(amax > 0, amax / top, F32(1)).astype(F32)
        scaled = (blocks / scale[:, None]).astype(F32)
    else:  # two levels: amax / (448 x 6) for the tensor, E4M3(amax_b / tensor / 6) per block
        scale_info = ml_dtypes.finfo(element_type(spec.scale_format))
        peak = amax.max()
        tensor = max(F32(peak / F32(float(scale_info.max) * float(info.max))), F32(2**-126))
        tensor = tensor if peak > 0 else F32(1)
        wanted = np.clip(amax / tensor / top, 0, F32(scale_info.max)).astype(F32)
        scale = wanted.astype(element_type(spec.scale_format)).astype(F32)
        divided = (blocks / tensor).astype(F32)
        safe = np.where(scale > 0, scale, F32(1))[:, None]
        scaled = np.where(scale[:, None] > 0, divided / safe, 0).astype(F32)
    clipped = np.clip(scaled, -float(top), float(top))
    elements = clipped.astype(element_type(spec.element_format)).astype(np.float64)
    gap = math.ldexp(1.0, math.floor(math.log2(float(top))) - int(info.nmant))
    saturated = np.abs(scaled) > float(top) + gap / 2
    stored = elements * np.asarray(scale, np.float64)[:, None] * float(tensor)
    return elements, stored, saturated, blocks.astype(np.float64)


def expected_shares(values: np.ndarray, spec) -> dict[str, float]:
    elements, stored, saturated, exact = quantized(values, spec)
    live = (exact != 0) & np.isfinite(exact)
    total = live.sum()
    smallest_normal = float(ml_dtypes.finfo(element_type(spec.element_format)).smallest_normal)
    magnitude = np.abs(elements)
    return {
        "zero": (live & (elements == 0)).sum() / total,
        "subnormal": (live & (magnitude > 0) & (magnitude < smallest_normal)).sum() / total,
        "saturated": (live & saturated).sum() / total,
        "rel_error": np.linalg.norm(stored - exact) / np.linalg.norm(exact),
    }


def tensor(seed: int, shape: tuple[int, ...], low: float, high: float) -> np.ndarray:
    """Normal values times 2^uniform(low, high) (float32 normal numbers), a few zeros."""
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * np.exp2(rng.uniform(low, high, shape))
    values[rng.random(shape) < 0.05] = 0
    return values.astype(F32)


CASES = [
    ("gradients", tensor(1, (40, 70), -30, -10)),
    ("wide", tensor(2, (3, 4, 300), -12, 12)),
    ("vector", tensor(3, (45,), -100, 0)),
    ("scalar", np.array(3e-5, F32)),
    # More blocks than one call's slices hold, the tensor's largest entry in the last slice:
    # every slice's tensor scale must still be the tensor's.
    ("many-slices", np.concatenate([tensor(4, (SLICES * SLICE_ROWS * 16,), -8, 0), [F32(1e4)]])),
]


@pytest.mark.parametrize("recipe", list(BLOCK_RECIPES))
@pytest.mark.parametrize(("case", "values"), CASES, ids=[c[0] for c in CASES])
def test_every_share_equals_the_numpy_reference(recipe, case, values):
    spec = BLOCK_RECIPES[recipe]
    shares, flushed = block_shares([values], spec)[0]
    expected = expected_shares(values, spec)
    assert flushed == 0
    for key in ("zero", "subnormal", "saturated"):
        assert getattr(shares, key) == expected[key], (case, recipe, key)
    assert shares.overflow == 0
    # XLA on CPU may compile the quantizer's x / scale as x * (1 / scale), which moves a value
    # on a rounding boundary by one element step: the errors agree to 0.1%, not bit for bit.
    assert shares.rel_error == pytest.approx(expected["rel_error"], rel=1e-3, abs=1e-6)


@pytest.mark.parametrize("recipe", list(BLOCK_RECIPES))
def test_float32_subnormal_inputs_are_counted_as_read_as_zero_here(recipe):
    values = np.full((2, 64), 1.0, F32)
    values[1] = np.float32(1e-40)  # float32 subnormals, which XLA on CPU reads as zero
    shares, flushed = block_shares([values], BLOCK_RECIPES[recipe])[0]
    assert flushed == 64
    assert shares.zero == 0.5


@pytest.mark.parametrize("recipe", list(BLOCK_RECIPES))
def test_a_float64_entry_past_float32_is_an_overflow(recipe):
    """Its float32 value is inf; its block's other entries go with it where the inf amax makes
    their scale infinite (FP8 blocks' amax / 448)."""
    values = np.array([1.0, 2.0, 1e300, 3.0])
    shares, _ = block_shares([values], BLOCK_RECIPES[recipe])[0]
    assert shares.overflow >= 0.25


@pytest.mark.parametrize("recipe", list(BLOCK_RECIPES))
def test_tensors_quantized_together_get_the_shares_each_gets_alone(recipe):
    """Slices of many tensors share the calls; each slice keeps its own tensor's scale."""
    spec = BLOCK_RECIPES[recipe]
    tensors = [values for _, values in CASES] + [tensor(9, (7, 3), -2, 2) * 1e6]
    together = block_shares(tensors, spec)
    assert together == [block_shares([values], spec)[0] for values in tensors]
