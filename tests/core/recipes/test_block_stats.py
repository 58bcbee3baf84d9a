"""Operand statistics, the recipe comparison, the outlier helper and its lesson, against numpy
computations written here (ml_dtypes for E4M3)."""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from block_reference import reference_quantize, relative_error, row_errors

from playground.core.data.synthetic import make_batch
from playground.core.lessons import Claim
from playground.core.lessons.blocks import outlier_lesson
from playground.core.model.models import initial_state
from playground.core.recipes.block_formats import BLOCK_RECIPES, FP8_BLOCK, MXFP8, MXFP8_OCP, NVFP4
from playground.core.recipes.block_outliers import add_outliers, outlier_count
from playground.core.recipes.block_stats import (
    per_tensor_float8_stats,
    recipe_comparison,
    recipe_operand_stats,
    row_norms,
)
from playground.core.settings.settings import StepConfig
from playground.core.step import report as report_module
from playground.core.step.operations_report import step_operations
from playground.core.step.policy import policy_for
from playground.core.step.report import run_report

E4M3 = ml_dtypes.float8_e4m3fn
SMALLEST_NORMAL_E4M3 = float(ml_dtypes.finfo(E4M3).smallest_normal)


def outlier_batch(share: float = 1e-3, scale: float = 2.0**16) -> np.ndarray:
    x = np.random.default_rng(0).standard_normal((64, 100)).astype(np.float32)
    return add_outliers(x, share, scale, seed=1)


def mxfp8_classes(x: np.ndarray, ocp: bool = False) -> dict[str, np.ndarray]:
    """numpy: per entry of x (K = 100 padded to 128 per row), its class under MXFP8's rule
    (``ocp``: 2^(floor(log2 amax) - 8); otherwise 2^ceil(log2(amax / 448)), the ratio float32)."""
    padded = np.zeros((x.shape[0], 128))
    padded[:, : x.shape[1]] = x
    blocks = padded.reshape(x.shape[0], 4, 32)
    amax = np.abs(blocks).max(axis=-1, keepdims=True)
    amax = np.where(amax > 0, amax, 1)
    if ocp:
        exponent = np.floor(np.log2(amax)) - 8
    else:
        exponent = np.ceil(np.log2(amax.astype(np.float32) / np.float32(448)))
    scaled = blocks / 2.0**exponent
    elements = np.clip(scaled, -448, 448).astype(E4M3).astype(np.float64)
    live = blocks != 0
    flushed = live & (elements == 0)
    saturated = live & np.isnan(scaled.astype(E4M3))
    kept = live & ~flushed & ~saturated
    normal = kept & (np.abs(elements) >= SMALLEST_NORMAL_E4M3)
    return {
        "live": live,
        "flushed": flushed,
        "saturated": saturated,
        "kept": kept,
        "normal": normal,
    }


def per_tensor_classes(x: np.ndarray) -> dict[str, np.ndarray]:
    """numpy: per-tensor float8 with current scaling, s = 448 / amax, E4M3(x s)."""
    scaled = x * np.float32(448 / np.abs(x).max())
    elements = scaled.astype(E4M3).astype(np.float64)
    live = x != 0
    flushed = live & (elements == 0)
    subnormal = live & ~flushed & (np.abs(elements) < SMALLEST_NORMAL_E4M3)
    return {"live": live, "flushed": flushed, "subnormal": subnormal}


@pytest.mark.parametrize("recipe", [MXFP8, MXFP8_OCP], ids=lambda r: r.scale_rule)
def test_mxfp8_operand_stats_per_tensor_and_per_block(recipe):
    x = outlier_batch()
    stats = recipe_operand_stats(x, recipe, "input")
    expected = mxfp8_classes(x, ocp=recipe is MXFP8_OCP)
    assert stats.size == x.size and stats.nonzero == int(expected["live"].sum())
    for name in ("flushed", "saturated", "kept"):
        assert stats.counts[name] == int(expected[name].sum())
        per_block = expected[name].sum(axis=-1) / expected["live"].sum(axis=-1)
        np.testing.assert_allclose(stats.block_shares[name], per_block)
    assert stats.subnormal == int((expected["kept"] & ~expected["normal"]).sum())
    assert math.isclose(sum(stats.shares.values()), 1.0)
    # The OCP rule clips the top of some blocks; rounding the scale up never does.
    assert (stats.counts["saturated"] > 0) == (recipe is MXFP8_OCP)
    assert stats.scale_log2.shape == (64, 4)  # 100 values: 4 blocks, the last holding 4


def test_per_tensor_float8_stats_against_numpy():
    x = outlier_batch()
    stats = per_tensor_float8_stats(x)
    expected = per_tensor_classes(x)
    assert stats.counts["flushed"] == int(expected["flushed"].sum())
    assert stats.subnormal == int(expected["subnormal"].sum())
    assert stats.counts["saturated"] == 0
    assert stats.scale_log2.shape == (1, 1)
    assert math.isclose(stats.scale_log2[0, 0], math.log2(np.abs(x).max() / 448), rel_tol=1e-6)


def test_nvfp4_stats_include_the_tensor_scale():
    x = outlier_batch()
    stats = recipe_operand_stats(x, NVFP4, "input")
    tensor_log2 = math.log2(np.abs(x).max() / (448 * 6))
    # The outlier's own block has block scale 448 (E4M3's largest) x the tensor scale.
    assert math.isclose(stats.scale_log2.max(), tensor_log2 + math.log2(448), abs_tol=1e-5)
    kernel = recipe_operand_stats(np.ones((20, 40), np.float32), NVFP4, "kernel")
    assert kernel.scale_log2.shape == (2, 3)  # 16 x 16 tiles over a padded 32 x 48


@pytest.mark.parametrize("share", [0.0, 1e-3])
def test_recipe_comparison_against_numpy(share):
    x = outlier_batch(share)
    w = (np.random.default_rng(2).standard_normal((100, 24)) / 10).astype(np.float32)
    reference = x.astype(np.float64) @ w
    comparison = recipe_comparison(x, w, FP8_BLOCK)
    blocks = (
        reference_quantize(x, (1, 128), FP8_BLOCK)[:, :100]
        @ reference_quantize(w, (128, 128), FP8_BLOCK)[:100, :24]
    )
    assert math.isclose(
        comparison["output_rel_error"], relative_error(blocks, reference), rel_tol=1e-4
    )
    assert math.isclose(
        comparison["per_tensor_float8_output_rel_error"],
        relative_error(per_tensor_product(x, w), reference),
        rel_tol=1e-4,
    )


def per_tensor_product(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """numpy: per-tensor float8 (E4M3, current scaling s = 448 / amax) of x @ w, in float64."""
    scales = [np.float32(448 / np.abs(t).max()) for t in (x, w)]
    a, b = ((t * s).astype(E4M3).astype(np.float64) for t, s in zip((x, w), scales, strict=True))
    return a @ b / scales[0] / scales[1]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fp8_block", "nvfp4"])
def test_the_step_reports_comparison_is_its_first_products_against_float64(name):
    """The step report measures the comparison in its own program, beside the step (MXFP8's
    is checked in tests/sections/step/test_blocks.py)."""
    config = StepConfig(n=40, d_in=70, d_out=8, compute_dtype=name, outlier_share=0.01)
    step = run_report(config)
    x, _ = make_batch(config)
    kernel = step.kernel.before
    recipe = BLOCK_RECIPES[name]
    reference = x.astype(np.float64) @ kernel
    kernel_tile = recipe.weight_tile or (recipe.block, 1)
    blocks = (
        reference_quantize(x, (1, recipe.block), recipe)[:, :70]
        @ reference_quantize(kernel, kernel_tile, recipe)[:70, :8]
    )
    per_tensor = per_tensor_product(x, kernel)
    comparison = step.blocks.comparison
    assert math.isclose(
        comparison["output_rel_error"], relative_error(blocks, reference), rel_tol=1e-4
    )
    assert math.isclose(
        comparison["per_tensor_float8_output_rel_error"],
        relative_error(per_tensor, reference),
        rel_tol=1e-4,
    )
    assert math.isclose(
        comparison["median_row_rel_error"],
        np.median(row_errors(blocks, reference)),
        rel_tol=1e-4,
    )
    assert math.isclose(
        comparison["per_tensor_float8_median_row_rel_error"],
        np.median(row_errors(per_tensor, reference)),
        rel_tol=1e-4,
    )


def _compiled_dots(config: StepConfig) -> int:
    """How many matmuls (HLO dots) the step report's compiled program of ``config`` has,
    traced afresh (a new function object: JAX caches traces by function)."""
    steps = report_module._both_steps.__wrapped__
    program = jax.jit(
        functools.wraps(steps)(lambda *args, **kwargs: steps(*args, **kwargs)),
        static_argnames=("precision", "model", "optimizer", "watch"),
    )
    x, y = make_batch(config)
    choice = config.model_choice
    initial = initial_state(np.uint32(config.model_seed), choice=choice, d_in=64, d_out=16)
    lowered = program.lower(
        np.uint32(0), x, y, np.float32(0.1), np.float32(1), initial,
        precision=policy_for(config), model=choice, optimizer=config.optimizer,
        watch=len(step_operations(choice, config.task)),
    )  # fmt: skip
    return sum(" dot(" in line for line in lowered.compile().as_text().splitlines())


@pytest.mark.slow
@pytest.mark.parametrize("model", [{}, {"model": "mlp", "hidden_layers": 1, "hidden_width": 32}])
def test_the_comparison_adds_one_matmul_to_the_steps_program(monkeypatch, model):
    """Its recipe and float32 products are the step's own first ones (XLA computes each once):
    only per-tensor float8's is new."""
    config = StepConfig(n=40, d_in=64, d_out=16, compute_dtype="mxfp8", **model)
    with_comparison = _compiled_dots(config)
    monkeypatch.setattr(
        report_module, "comparison_measure", lambda x, kernel, recipe: jnp.zeros((3, 0))
    )
    assert with_comparison == _compiled_dots(config) + 1


def test_row_norms_against_float64_at_the_edges_of_float32():
    rng = np.random.default_rng(5)
    rows = np.stack(
        [
            rng.standard_normal(300),
            rng.standard_normal(300) * 1e25,  # its squares overflow float32
            rng.standard_normal(300) * 1e-25,  # its squares flush to zero in float32
            np.zeros(300),
        ]
    ).astype(np.float32)
    norms = np.asarray(jax.jit(row_norms)(rows))
    np.testing.assert_allclose(norms, np.linalg.norm(rows.astype(np.float64), axis=1), rtol=1e-5)
    rows[1, 7], rows[2, 3] = np.inf, np.nan
    norms = np.asarray(jax.jit(row_norms)(rows))
    assert norms[1] == np.inf and np.isnan(norms[2]) and norms[3] == 0


def test_add_outliers_scales_exactly_the_drawn_entries():
    x = np.random.default_rng(0).standard_normal((50, 40)).astype(np.float32)
    with_outliers = add_outliers(x, 0.005, 2.0**10, seed=3)
    changed = with_outliers != x
    assert changed.sum() == outlier_count(x.size, 0.005) == 10
    np.testing.assert_array_equal(with_outliers[changed], x[changed] * 2.0**10)
    np.testing.assert_array_equal(add_outliers(x, 0.005, 2.0**10, seed=3), with_outliers)
    assert outlier_count(x.size, 1e-9) == 1 and outlier_count(x.size, 0) == 0
    np.testing.assert_array_equal(add_outliers(x, 0, 2.0**16, seed=3), x)
    with pytest.raises(ValueError, match="outlier_share must be between 0 and 0.01"):
        add_outliers(x, 0.02, 2.0, seed=0)
    with pytest.raises(ValueError, match="outlier_scale must be between 2\\^0 and 2\\^16"):
        add_outliers(x, 0.001, 2.0**17, seed=0)


def test_outlier_lesson_holds_with_outliers_and_not_without():
    x = outlier_batch()
    lesson = outlier_lesson(x)
    per_tensor, mxfp8 = per_tensor_classes(x), mxfp8_classes(x)
    lost = (per_tensor["flushed"] | per_tensor["subnormal"]).sum() / per_tensor["live"].sum()
    normal = mxfp8["normal"].sum() / mxfp8["live"].sum()
    assert type(lesson) is Claim and lost > 0.5 and normal >= 0.9 and lesson.holds
    assert f"{lost:.1%}" in lesson.sentence and f"{normal:.1%}" in lesson.sentence
    assert f"{lost:.1%}" in lesson.condition
    plain = outlier_lesson(outlier_batch(share=0.0))
    assert not plain.holds  # without an outlier per-tensor float8 loses nothing much
