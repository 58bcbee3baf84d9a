"""Each operand's class counts, as the block report measures them in one compiled program and as
``recipe_operand_stats`` and ``per_tensor_float8_stats`` do, against a numpy classification
written here (ml_dtypes for E4M3 and E2M1): a row of zeros, a padded last block, entries from
2^-14 to 2^2 times a normal draw (some flushed, some subnormal), and inf and NaN entries, which
are never counted."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from playground.core.recipes.block_formats import FP8_BLOCK, MXFP8, MXFP8_OCP, NVFP4
from playground.core.recipes.block_outliers import normal_share
from playground.core.recipes.block_report import block_report
from playground.core.recipes.block_stats import per_tensor_float8_stats, recipe_operand_stats
from playground.core.recipes.registry import recipe

FORMATS = {NVFP4: ml_dtypes.float4_e2m1fn}  # E4M3 elsewhere
# The tiles each recipe quantizes x (input) and the kernel with in the forward matmul.
TILES = {
    MXFP8: {"input": (1, 32), "kernel": (32, 1)},
    MXFP8_OCP: {"input": (1, 32), "kernel": (32, 1)},
    FP8_BLOCK: {"input": (1, 128), "kernel": (128, 128)},
    NVFP4: {"input": (1, 16), "kernel": (16, 16)},
}
CLASSES = ("flushed", "saturated", "kept")


def operand(shape: tuple[int, int], seed: int, nonfinite: bool) -> np.ndarray:
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(shape) * 2.0 ** rng.integers(-14, 3, shape)
    values[: shape[0] // 2, : shape[1] // 2] *= 2.0**-20  # far below the tensor's amax
    # Blocks of zeros: a row (1-D blocks along rows), a column (down columns), a 16 x 16 tile.
    values[1], values[:, 1], values[16:32, 16:32] = 0, 0, 0
    if nonfinite:
        values[2, 20], values[3, -1], values[-1, 7] = np.inf, np.nan, -np.inf
    return values.astype(np.float32)


def element_facts(fmt) -> tuple[float, float, float]:
    """(max, overflow edge: max plus half the gap above it, smallest normal) from finfo."""
    finfo = ml_dtypes.finfo(fmt)
    largest = float(finfo.max)
    gap = 2.0 ** (math.floor(math.log2(largest)) - int(finfo.nmant))
    return largest, largest + gap / 2, float(finfo.smallest_normal)


def block_scale(amax: float, recipe) -> np.float32:
    """The tile's scale by the recipe's rule (for NVFP4: of the tile divided by its tensor
    scale); any scale for an all-zero tile."""
    if amax == 0:
        return np.float32(1)
    if recipe.scale_rule == "round_up":  # 2^ceil(log2(amax / 448)), the ratio in float32
        return np.float32(2.0 ** math.ceil(math.log2(np.float32(amax) / np.float32(448))))
    if recipe.scale_rule == "ocp":  # 2^(floor(log2 amax) - 8)
        return np.float32(2.0 ** (math.floor(math.log2(amax)) - 8))
    if recipe is FP8_BLOCK:
        return np.float32(amax) / np.float32(448)
    return np.float32(min(np.float32(amax) / np.float32(6), 448)).astype(ml_dtypes.float8_e4m3fn)


def reference(values: np.ndarray, tile, recipe) -> dict[str, np.ndarray]:
    """numpy: per tile of the zero-padded values, how many entries are live (nonzero, finite)
    and in each class, NaN counts for a tile holding inf or NaN (its scale is not a number's);
    and the subnormal count over the other tiles."""
    fmt = FORMATS.get(recipe, ml_dtypes.float8_e4m3fn)
    largest, edge, smallest_normal = element_facts(fmt)
    rows, cols = (math.ceil(s / t) * t for s, t in zip(values.shape, tile, strict=True))
    padded = np.zeros((rows, cols), np.float32)
    padded[: values.shape[0], : values.shape[1]] = values
    tensor_amax = np.abs(values).max()
    tensor_scale = np.float32(1)
    if recipe is NVFP4 and np.isfinite(tensor_amax) and tensor_amax > 0:
        tensor_scale = np.float32(tensor_amax) / np.float32(448 * 6)
    grid = (rows // tile[0], cols // tile[1])
    counts = {name: np.full(grid, np.nan) for name in ("live", *CLASSES)}
    subnormal = 0
    for i, j in np.ndindex(grid):
        block = padded[i * tile[0] : (i + 1) * tile[0], j * tile[1] : (j + 1) * tile[1]]
        live = block != 0
        counts["live"][i, j] = np.sum(live & np.isfinite(block))
        if not np.isfinite(block).all():
            continue
        block = block / tensor_scale
        scale = block_scale(float(np.abs(block).max()), recipe)
        scaled = block / scale if scale > 0 else np.zeros_like(block)
        elements = np.clip(scaled, -largest, largest).astype(fmt).astype(np.float64)
        flushed = live & (elements == 0)
        saturated = live & ~flushed & (np.abs(scaled) > edge)
        kept = live & ~flushed & ~saturated
        for name, mask in zip(CLASSES, (flushed, saturated, kept), strict=True):
            counts[name][i, j] = mask.sum()
        subnormal += int(np.sum(kept & (np.abs(elements) < smallest_normal)))
    return counts | {"subnormal": subnormal}


@pytest.mark.parametrize("nonfinite", [False, True], ids=["finite", "inf_nan"])
@pytest.mark.parametrize("spec", [MXFP8, FP8_BLOCK, NVFP4], ids=lambda r: r.name)
def test_operand_counts_against_numpy(spec, nonfinite):
    values = {
        "input": operand((48, 150), seed=3, nonfinite=nonfinite),
        "kernel": operand((150, 40), seed=4, nonfinite=nonfinite),
    }
    report = block_report(recipe(spec.name), values["input"], values["kernel"])
    for role, tile in TILES[spec].items():
        expected = reference(values[role], tile, spec)
        for stats in (report.operands[role], recipe_operand_stats(values[role], spec, role)):
            check_counts(stats, values[role], expected, nonfinite)


def check_counts(stats, values: np.ndarray, expected: dict[str, np.ndarray], nonfinite: bool):
    live = (values != 0) & np.isfinite(values)
    assert stats.size == values.size
    assert stats.nonzero == expected["live"].sum() == live.sum()
    finite = ~np.isnan(expected["kept"])  # the tiles holding no inf or NaN
    with np.errstate(invalid="ignore"):
        for name in CLASSES:
            share = expected[name] / expected["live"]
            np.testing.assert_array_equal(stats.block_shares[name][finite], share[finite])
    blocks = sum(stats.block_shares[name] for name in CLASSES)
    np.testing.assert_allclose(blocks[expected["live"] > 0], 1.0)
    assert np.isnan(blocks[expected["live"] == 0]).all()  # a tile of zeros has no share
    if not nonfinite:
        for name in CLASSES:
            assert stats.counts[name] == expected[name].sum()
        assert stats.subnormal == expected["subnormal"] > 0
        assert stats.counts["flushed"] > 0


def test_the_ocp_rule_saturates_and_its_counts_match_numpy():
    values = operand((48, 150), seed=4, nonfinite=False)
    stats = recipe_operand_stats(values, MXFP8_OCP, "input")
    expected = reference(values, TILES[MXFP8_OCP]["input"], MXFP8_OCP)
    assert stats.counts == {name: int(expected[name].sum()) for name in CLASSES}
    assert stats.counts["saturated"] > 0 and stats.subnormal == expected["subnormal"]


@pytest.mark.parametrize("nonfinite", [False, True], ids=["finite", "inf_nan"])
def test_per_tensor_float8_counts_against_numpy(nonfinite):
    values = operand((48, 150), seed=5, nonfinite=nonfinite)
    stats = per_tensor_float8_stats(values)
    finite = np.isfinite(values)
    amax = np.abs(values).max()
    # Current scaling: 448 / amax; a tensor whose amax is inf or NaN keeps the scale 1.
    scale = np.float32(448) / np.float32(amax) if np.isfinite(amax) else np.float32(1)
    scaled = np.where(finite, values, 0) * scale
    elements = np.clip(scaled, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    live = (values != 0) & finite
    flushed = live & (elements == 0)
    _, _, smallest_normal = element_facts(ml_dtypes.float8_e4m3fn)
    assert stats.nonzero == live.sum()
    kept = live & ~flushed
    assert stats.counts == {"flushed": flushed.sum(), "saturated": 0, "kept": kept.sum()}
    assert stats.subnormal == np.sum(kept & (np.abs(elements) < smallest_normal))
    assert stats.scale_log2[0, 0] == -np.log2(scale)


@pytest.mark.parametrize("spec", [FP8_BLOCK, NVFP4], ids=lambda r: r.name)
def test_a_report_under_another_recipe_measures_x_under_mxfp8_for_its_lesson(spec):
    x = operand((48, 150), seed=6, nonfinite=False)
    kernel = operand((150, 40), seed=4, nonfinite=False)  # the shapes compiled above
    measured = block_report(recipe(spec.name), x, kernel).mxfp8_input
    mxfp8 = reference(x, (1, 32), MXFP8)
    normal = mxfp8["kept"].sum() - mxfp8["subnormal"]
    assert measured.nonzero == np.sum(x != 0)
    assert normal_share(measured) == pytest.approx(normal / np.sum(x != 0), rel=1e-12)
