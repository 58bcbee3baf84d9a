"""The block-scaling panel and the summary's ``recipe_comparison`` against numbers computed here:
MXFP8 and per-tensor float8 quantization in numpy with ml_dtypes' E4M3, products in float64."""

from __future__ import annotations

import json
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest
from block_reference import E4M3, mxfp8, per_tensor_float8, relative_error, row_errors

from helpers import step_report
from playground.core.data.synthetic import make_batch
from playground.core.lessons import STEP_LESSONS
from playground.core.lessons.blocks import outlier_claim
from playground.core.recipes.registry import RECIPES
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.step.block_map import MAP_CELLS, block_scale_figure
from playground.sections.step.blocks import block_note, recipe_comparison
from playground.sections.step.causes import cause_sentence
from playground.sections.step.summary import summarize
from playground.views.chart_text import describe

SMALLEST_NORMAL = float(ml_dtypes.finfo(E4M3).smallest_normal)
# D_in = 70: blocks of 32 along each row of x, the last holding 70 - 2 x 32 values.
CONFIG = StepConfig(n=48, d_in=70, d_out=8, compute_dtype="mxfp8", outlier_share=0.002)


def test_recipe_comparison_is_the_first_layers_output_error_against_float64():
    step = step_report(CONFIG)
    x, _ = make_batch(step.config)
    kernel = step.kernel.before
    exact = x.astype(np.float64) @ kernel
    blocks = mxfp8(x)[0] @ mxfp8(kernel.T)[0].T  # the kernel in blocks down its columns
    per_tensor = per_tensor_float8(x) @ per_tensor_float8(kernel)
    comparison = recipe_comparison(step)
    assert comparison["output_rel_error"] == pytest.approx(relative_error(blocks, exact), 1e-4)
    assert comparison["per_tensor_float8_output_rel_error"] == pytest.approx(
        relative_error(per_tensor, exact), 1e-4
    )
    assert comparison["median_row_rel_error"] == pytest.approx(
        np.median(row_errors(blocks, exact)), 1e-4
    )
    assert comparison["per_tensor_float8_median_row_rel_error"] == pytest.approx(
        np.median(row_errors(per_tensor, exact)), 1e-4
    )
    assert comparison["last_block_size"] == 70 - 2 * 32
    summary = summarize(step)
    assert summary["recipe_comparison"] == comparison
    json.dumps(summary, allow_nan=False)  # strict JSON


RANKED_DIFFERENTLY = "The two rank them differently: the norm weighs each row by the size"


def test_an_outlier_row_decides_the_norm_and_the_median_shows_a_typical_row():
    """The lesson's one outlier: per-tensor float8's output error is smaller in norm, decided
    by the outlier's row, which sets its one scale (448 / amax); row by row MXFP8's is
    smaller, and the note says why the two rank them differently. Without the outlier's row
    the norm ranks them as the median does."""
    (lesson,) = [x for x in STEP_LESSONS if x.claim_on is outlier_claim]
    step = lesson.run()
    x, _ = make_batch(step.config)
    kernel = step.kernel.before
    exact = x.astype(np.float64) @ kernel
    outputs = {
        "mxfp8": mxfp8(x)[0] @ mxfp8(kernel.T)[0].T,
        "per-tensor": per_tensor_float8(x) @ per_tensor_float8(kernel),
    }
    norm = {name: relative_error(out, exact) for name, out in outputs.items()}
    median = {name: np.median(row_errors(out, exact)) for name, out in outputs.items()}
    assert norm["per-tensor"] < norm["mxfp8"] and median["mxfp8"] < median["per-tensor"]
    others = np.ones(len(x), bool)
    others[np.argmax(np.abs(x).max(axis=1))] = False  # the outlier's row
    without = {name: relative_error(out[others], exact[others]) for name, out in outputs.items()}
    assert without["mxfp8"] < without["per-tensor"]
    comparison = recipe_comparison(step)
    assert comparison["per_tensor_float8_median_row_rel_error"] == pytest.approx(
        median["per-tensor"], 1e-4
    )
    note = " ".join(block_note(step).split())
    assert RANKED_DIFFERENTLY in note
    # Where the two agree (no outlier here), the note does not say they differ.
    plain = step_report(CONFIG.replace(outlier_share=0.0))
    errors = recipe_comparison(plain)
    agree = (errors["output_rel_error"] < errors["per_tensor_float8_output_rel_error"]) == (
        errors["median_row_rel_error"] < errors["per_tensor_float8_median_row_rel_error"]
    )
    assert (RANKED_DIFFERENTLY in " ".join(block_note(plain).split())) == (not agree)


def test_another_recipe_has_null_errors_and_a_note_naming_the_block_recipes():
    step = step_report(CONFIG.replace(compute_dtype="bfloat16"))
    comparison = recipe_comparison(step)
    assert comparison["output_rel_error"] is None
    assert comparison["per_tensor_float8_output_rel_error"] is None
    assert comparison["median_row_rel_error"] is None
    note = block_note(step)
    block_recipes = [name for name, entry in RECIPES.items() if entry.block is not None]
    assert block_recipes and all(name in note for name in block_recipes)
    assert block_scale_figure(step)["data"] == []


def test_the_note_gives_the_kernel_the_last_block_and_the_shares_of_x():
    step = step_report(CONFIG)
    x, _ = make_batch(step.config)
    stored, _ = mxfp8(x)
    live = x != 0
    flushed = np.sum(live & (stored == 0)) / np.sum(live)
    note = block_note(step)
    # The JSON names the kernel as the note does, under `kernel`: a dict with a string under
    # `path` is a file to gradio_client, which would try to download it.
    kernel = recipe_comparison(step)["kernel"]
    assert "path" not in recipe_comparison(step)
    assert kernel.startswith("emulated") and f"Matmul kernel here: {kernel}." in note
    assert "last holding 6 real values" in note
    assert f"| input x | {flushed:.2%} | 0.00% | {1 - flushed:.2%} |" in note
    # Per-tensor float8 loses most of x (flushed or subnormal) to the outliers' scale.
    elements = np.abs((x * np.float32(448 / np.abs(x).max())).astype(E4M3).astype(np.float64))
    share = np.sum(live & (elements < SMALLEST_NORMAL)) / np.sum(live)  # zero or subnormal
    assert share > 0.5 and f"{share:.2%} |" in note


def test_the_lesson_is_taught_only_where_its_numbers_hold():
    with_outliers, without = (
        block_note(step_report(CONFIG)),
        block_note(step_report(CONFIG.replace(outlier_share=0.0))),
    )
    assert "keeps" in with_outliers and "not shown by this batch" not in with_outliers
    assert "not shown by this batch" in without


def test_the_scale_map_is_log2_of_each_blocks_scale():
    step = step_report(CONFIG)
    x, _ = make_batch(step.config)
    figure = block_scale_figure(step)
    input_map = np.asarray(figure["data"][0]["z"], np.float64)
    np.testing.assert_array_equal(input_map, mxfp8(x)[1])
    kernel_map = np.asarray(figure["data"][1]["z"], np.float64)
    np.testing.assert_array_equal(kernel_map, mxfp8(step.kernel.before.T)[1].T)
    assert figure["data"][0]["coloraxis"] == figure["data"][1]["coloraxis"]
    rows, columns = input_map.shape  # small enough to draw every block
    assert (figure["data"][0]["dy"], figure["data"][0]["dx"]) == (1, 1)
    assert f"input x: a {rows} x {columns} map, values from" in describe(figure)


def _largest_per_group(values: np.ndarray, rows: int, columns: int) -> np.ndarray:
    """numpy, loop by loop: the largest finite value of each (rows x columns) group."""
    out = np.full((-(-values.shape[0] // rows), -(-values.shape[1] // columns)), np.nan)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            group = values[i * rows : (i + 1) * rows, j * columns : (j + 1) * columns]
            finite = group[np.isfinite(group)]
            out[i, j] = finite.max() if finite.size else np.nan
    return out


def test_a_large_map_is_drawn_in_groups_of_their_largest_scale_and_stays_small():
    """The largest maps a step makes (NVFP4's x at 4096 x 1024: 4096 x 64 blocks; MXFP8's
    kernel at 1024 x 1024: 32 x 1024), with blank blocks and one outlier block."""
    rng = np.random.default_rng(4)
    x_map = rng.integers(-12, -6, (4096, 64)).astype(np.float64)
    x_map[rng.random(x_map.shape) < 0.01] = np.nan  # blocks of zeros
    x_map[2049, 7] = 9.0  # an outlier's block
    kernel_map = rng.integers(-9, -7, (32, 1024)).astype(np.float64)
    operands = {"input": x_map, "kernel": kernel_map}
    step = SimpleNamespace(
        blocks=SimpleNamespace(
            operands={k: SimpleNamespace(scale_log2=v) for k, v in operands.items()}
        )
    )
    figure = block_scale_figure(step)
    text = " ".join(describe(figure).split())
    for trace, values in zip(figure["data"], operands.values(), strict=True):
        rows, columns = -(-values.shape[0] // MAP_CELLS[0]), -(-values.shape[1] // MAP_CELLS[1])
        assert (trace["dy"], trace["dx"]) == (rows, columns)
        drawn = np.asarray(trace["z"], np.float64)  # None (blank) reads as NaN
        expected = _largest_per_group(values, rows, columns)
        np.testing.assert_array_equal(drawn, expected)
        assert drawn.shape[0] <= MAP_CELLS[0] and drawn.shape[1] <= MAP_CELLS[1]
        # The text alternative: the grid, its range, and where its largest cell is drawn.
        at_row, at_column = np.unravel_index(np.nanargmax(expected), expected.shape)
        assert (
            f"{trace['name']}: a {expected.shape[0]} x {expected.shape[1]} map, values from "
            f"{np.nanmin(expected):g} to {np.nanmax(expected):g}, the largest at "
            f"x {at_column * columns:,}, y {at_row * rows:,}"
        ) in text
    assert "input x: a 256 x 64 map, values from" in text and "at x 7, y 2,048" in text
    assert figure["layout"]["yaxis"]["title"]["text"] == "row of x (groups of 16: the largest)"
    assert len(json.dumps(figure, allow_nan=False)) < 200_000  # as every figure at most


def test_the_outlier_lesson_holds_on_its_run_and_fails_elsewhere():
    (lesson,) = [x for x in STEP_LESSONS if x.claim_on is outlier_claim]
    x, _ = make_batch(lesson.config())
    assert np.sum(x != make_batch(lesson.config().replace(outlier_share=0.0))[0]) == 1
    claim = lesson.claim()
    assert claim.holds and claim.sentence in block_note(lesson.run())
    assert not outlier_claim(
        step_report(CONFIG.replace(outlier_share=0.0))
    ).holds  # no outlier: nothing lost
    assert not outlier_claim(step_report(CONFIG.replace(compute_dtype="bfloat16"))).holds


def test_gradients_lost_to_block_roundings_are_not_blamed_on_the_loss_scale():
    # Two rows, outliers 2^16 times the rest: NVFP4's coarse block scales flush some of x's
    # entries, and the kernel's gradient entries that only they fed come out as 0. Without the
    # Hadamard rotation those are the flushed features' rows, whatever S: the count is the same
    # at every loss scale. With it, the rotation's random signs are drawn from a digest of the
    # arriving gradient's bits, which S changes, so which entries flush varies with S (17 or 20
    # at these; a draw, not the scale lifting them): each S still loses some, and the cause
    # blames the block scales, never the loss scale.
    config = StepConfig(n=2, d_in=64, d_out=4, compute_dtype="nvfp4", outlier_share=0.01, lr=0)
    scales = (2.0**0, 2.0**10, 2.0**15, 2.0**20)
    unrotated = config.replace(nvfp4_hadamard="off")
    counts = {
        scale: run_report(unrotated.replace(loss_scale=scale)).kernel.underflow_count
        for scale in scales
    }
    assert counts[2.0**10] > 0 and len(set(counts.values())) == 1, counts  # S lifts none
    for lost in (unrotated, config):
        report = run_report(lost)
        assert report.kernel.underflow_count > 0
        sentence = cause_sentence("gradient_underflow", report)
        assert sentence.startswith(
            f"{report.kernel.underflow_count:,} gradient entries came out as zero"
        )
        assert "Each block's own scale" in sentence and "Current scaling" not in sentence
