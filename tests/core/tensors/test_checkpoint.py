"""``python -m playground inspect``'s core: a sharded checkpoint read one tensor at a time
(core/tensors/checkpoint.py), each recipe's statistics (core/tensors/recipe_stats.py) against
a float64 reference written here with numpy and ml_dtypes, and the record
(core/tensors/inspection.py)."""

from __future__ import annotations

import json
import math

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from playground.core.recipes.block_formats import FP8_BLOCK, NVFP4
from playground.core.recipes.block_quantize import quantize
from playground.core.tensors.checkpoint import (
    CheckpointError,
    checkpoint_entries,
    matmul_shape,
    read_matrix,
)
from playground.core.tensors.inspection import (
    inspect_checkpoint,
    keeps_high_precision,
    kept_by_recipe,
)
from playground.core.tensors.recipe_stats import RECIPES, STATISTICS, tensor_stats
from tests.recipe_reference import reference

RNG = np.random.default_rng(7)
BF16, E4M3, E5M2, E2M1 = (
    ml_dtypes.bfloat16,
    ml_dtypes.float8_e4m3fn,
    ml_dtypes.float8_e5m2,
    ml_dtypes.float4_e2m1fn,
)


def _tensors() -> dict[str, np.ndarray]:
    outliers = (RNG.standard_normal((128, 256)) * 0.01).astype(np.float32)
    outliers[3, 7], outliers[90, 200], outliers[5, 5] = 40.0, -25.0, 1e-9
    bad = (RNG.standard_normal((32, 64)) * 0.1).astype(np.float16)
    bad[0, 0], bad[1, 1], bad[2, 2], bad[3, 3], bad[4, 4] = np.nan, np.inf, np.inf, -np.inf, -np.inf
    return {
        "conv.weight": (
            RNG.standard_normal((8, 3, 5, 5)) * np.exp2(RNG.integers(-6, 3, (1, 3, 5, 5)))
        ).astype(BF16),
        "norm.bias": (RNG.standard_normal(300) * 0.1).astype(np.float32),
        "proj.weight": (RNG.standard_normal((64, 256)) * 0.02).astype(BF16),
        "outlier.weight": outliers,
        "bad.weight": bad,
        "layer.grad": (
            RNG.standard_normal((64, 128)) * 1e-5 * np.exp2(RNG.integers(-16, 8, 128))
        ).astype(np.float32),
    }


TENSORS = _tensors()
GRADIENTS = {"layer.grad"}


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """An index and two shards, as ``save_pretrained`` writes a sharded model."""
    folder = tmp_path_factory.mktemp("sharded")
    names = list(TENSORS)
    shards = {
        "model-00001-of-00002.safetensors": names[:3],
        "model-00002-of-00002.safetensors": names[3:],
    }
    weight_map = {}
    for shard, members in shards.items():
        save_file({name: TENSORS[name] for name in members}, folder / shard)
        weight_map.update(dict.fromkeys(members, shard))
    (folder / "model.safetensors.index.json").write_text(
        json.dumps({"metadata": {"total_size": 0}, "weight_map": weight_map})
    )
    return folder


# --- the float64 reference: each recipe's rule, entry by entry -------------------------------


def _finite_matrix(name: str) -> np.ndarray:
    values = TENSORS[name].reshape(matmul_shape(TENSORS[name].shape)).astype(np.float64)
    return np.where(np.isfinite(values), values, 0.0)


# The quick tier checks a conv weight and a gradient (both block layouts); the full tier every
# tensor of the checkpoint.
QUICK_TENSORS = ("conv.weight", "layer.grad")


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(name, marks=() if name in QUICK_TENSORS else pytest.mark.slow)
        for name in TENSORS
    ],
)
def test_every_recipe_matches_the_float64_reference(name):
    matrix = TENSORS[name].reshape(matmul_shape(TENSORS[name].shape))
    stats = tensor_stats(matrix, gradient=name in GRADIENTS)
    exact_recipes = {"bfloat16", "float16", "float8_current", "mxfp8"}
    for recipe in RECIPES:
        expected = reference(_finite_matrix(name), recipe, name in GRADIENTS)
        finite = stats.finite
        got = stats.recipes[recipe]
        tolerance = 1e-12 if recipe in exact_recipes else 2e-5
        for key in STATISTICS:
            want = expected[key]
            if key in ("underflow", "overflow", "mse"):
                want = want * TENSORS[name].size / finite  # the shares are over finite entries
            assert getattr(got, key) == pytest.approx(want, rel=tolerance, abs=0), (recipe, key)


def test_a_conv_weight_is_blocked_as_out_by_in_times_k():
    conv = TENSORS["conv.weight"]
    assert matmul_shape(conv.shape) == (8, 75)
    stats = tensor_stats(conv.reshape(8, 75))
    # NVFP4's 16 x 16 tiles: 8 rows x 16 of the 75 (in x k) columns, five of them; blocked
    # along the last axis instead, a tile would hold 16 rows of 5 kernel taps.
    along_rows = reference(conv.reshape(8, 75).astype(np.float64), "nvfp4", False)
    along_kernel = reference(conv.reshape(-1, 5).astype(np.float64), "nvfp4", False)
    assert stats.recipes["nvfp4"].mse == pytest.approx(along_rows["mse"], rel=2e-5)
    assert stats.recipes["nvfp4"].mse != pytest.approx(along_kernel["mse"], rel=1e-2)
    assert stats.recipes["nvfp4"].scale_max == pytest.approx(along_rows["scale_max"], rel=1e-6)


def test_non_finite_entries_are_counted_by_kind_and_left_out():
    stats = tensor_stats(TENSORS["bad.weight"])
    assert stats.nonfinite == {"nan": 1, "posinf": 2, "neginf": 2}
    assert stats.finite == 32 * 64 - 5
    assert all(
        value is not None and math.isfinite(value)
        for recipe in stats.recipes.values()
        for value in vars(recipe).values()
    )


def test_gradients_take_e5m2_per_tensor_and_keep_tiny_values():
    grad = TENSORS["layer.grad"]
    as_gradient = tensor_stats(grad, gradient=True).recipes["float8_current"]
    as_weight = tensor_stats(grad, gradient=False).recipes["float8_current"]
    assert as_gradient.scale_max == pytest.approx(float(np.abs(grad).max()) / 57344, rel=1e-6)
    assert as_weight.scale_max == pytest.approx(float(np.abs(grad).max()) / 448, rel=1e-6)
    assert as_gradient.underflow < as_weight.underflow


@pytest.mark.slow
@pytest.mark.parametrize("recipe, tile", [(FP8_BLOCK, (128, 128)), (NVFP4, (16, 16))])
def test_block_recipes_agree_with_the_repos_jax_quantizer(recipe, tile):
    weight = TENSORS["outlier.weight"]
    dequantized = np.asarray(quantize(jnp.asarray(weight), tile, recipe).dequantized(), np.float64)
    error_sq = float(np.sum((dequantized - weight.astype(np.float64)) ** 2))
    got = tensor_stats(weight).recipes[recipe.name]
    assert got.mse == pytest.approx(error_sq / weight.size, rel=2e-5)


def test_a_sharded_checkpoint_reads_every_tensor_from_its_shard(checkpoint):
    entries = checkpoint_entries(checkpoint)
    assert [e.name for e in entries] == list(TENSORS)
    assert {e.file.name for e in entries} == {
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    }
    for entry in entries:
        np.testing.assert_array_equal(
            read_matrix(entry).view(np.uint8),
            TENSORS[entry.name].reshape(matmul_shape(entry.shape)).view(np.uint8),
        )


def test_float8_tensors_are_read_from_their_bytes(tmp_path):
    values = (RNG.standard_normal((4, 32)) * 10).astype(E4M3)
    save_file({"w": values, "g": values.astype(E5M2)}, tmp_path / "f8.safetensors")
    by_name = {e.name: e for e in checkpoint_entries(tmp_path / "f8.safetensors")}
    np.testing.assert_array_equal(read_matrix(by_name["w"]).view(np.uint8), values.view(np.uint8))
    assert read_matrix(by_name["g"]).dtype == np.dtype(E5M2)


@pytest.mark.parametrize(
    "name",
    [
        "proj.weight",
        pytest.param("outlier.weight", marks=pytest.mark.slow),
        pytest.param("norm.bias", marks=pytest.mark.slow),
    ],
)
def test_a_sample_keeps_at_most_n_values_in_whole_row_groups(checkpoint, name):
    entry = next(e for e in checkpoint_entries(checkpoint) if e.name == name)
    sample = read_matrix(entry, sample=4096)
    full = TENSORS[name].reshape(matmul_shape(entry.shape))
    assert 0 < sample.size <= 4096
    assert sample.shape[1] == (full.shape[1] if full.shape[0] > 1 else min(4096, full.shape[1]))
    if full.shape[0] > 1:  # each sampled row is one of the tensor's rows
        rows = {full[i].tobytes() for i in range(full.shape[0])}
        assert all(row.tobytes() in rows for row in sample)


@pytest.mark.slow
def test_keep_high_precision_follows_the_thresholds(checkpoint):
    record = inspect_checkpoint(checkpoint)
    by_name = {row["name"]: row["recipes"] for row in record["tensors"]}
    nvfp4_underflow = by_name["proj.weight"]["nvfp4"]["underflow"]
    assert keeps_high_precision(by_name["proj.weight"], underflow_threshold=nvfp4_underflow / 2)
    assert not keeps_high_precision(by_name["proj.weight"], underflow_threshold=nvfp4_underflow * 2)
    assert not keeps_high_precision(
        by_name["proj.weight"], underflow_threshold=0.5, rule_recipes=("float8_current",)
    )
    assert keeps_high_precision(by_name["proj.weight"], underflow_threshold=1, mse_threshold=0)
    expected = [name for name, recipes in by_name.items() if keeps_high_precision(recipes)]
    assert record["keep_high_precision"] == expected
    # Per recipe: AutoswitchGemm's two thresholds on that recipe's own statistics, read here.
    by_recipe = kept_by_recipe(record)
    assert set(by_recipe) == set(RECIPES[2:])
    for recipe, names in by_recipe.items():
        assert names == [
            name
            for name, recipes in by_name.items()
            if recipes
            and (recipes[recipe]["underflow"] > 0.05 or (recipes[recipe]["mse"] or 0) > 1e-4)
        ], recipe
    assert (
        inspect_checkpoint(checkpoint, underflow_threshold=1, mse_threshold=1)[
            "keep_high_precision"
        ]
        == []
    )


def test_bad_paths_are_refused_by_name(tmp_path):
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint_entries(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="no .safetensors"):
        checkpoint_entries(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text("{not json")
    with pytest.raises(CheckpointError, match="not a safetensors index"):
        checkpoint_entries(tmp_path)
    (tmp_path / "model.safetensors.index.json").write_text(
        '{"weight_map": {"w": "gone.safetensors"}}'
    )
    with pytest.raises(CheckpointError, match="gone.safetensors"):
        checkpoint_entries(tmp_path)
