"""The pictures of chapters 11-17 (playground.sections.route.pictures_operations), read as the
learner reads them: the short claim beside each is plain, and each picture draws the contrast
the claim argues, its numbers checked against ones computed here with numpy and ml_dtypes
from the runs' own arrays."""

from __future__ import annotations

import functools
import json
import re

import ml_dtypes
import numpy as np
import plotly.graph_objects as go
import pytest

from helpers import one_line_legends, unlinked
from playground.core.data.synthetic import make_batch
from playground.core.lessons import lesson
from playground.core.lessons.route import CHAPTERS
from playground.core.lessons.transformer import block_tensors
from playground.core.step.report import run_report
from playground.sections.route.view import chapter_view
from playground.views.plotly import DARK_PALETTE

LATE = (
    "block-scaling",
    "layernorm-float16",
    "loss-rounds",
    "loss-steps",
    "attention-float16",
    "attention-bfloat16",
    "swiglu-outlier",
)
E4M3 = ml_dtypes.finfo(ml_dtypes.float8_e4m3fn)
# Names that carry digits without being figures: formats, and powers written 2^k.
FORMAT_NAMES = r"\b(?:b?float\d+|MXFP\d+|E\dM\d)\b|2\^\d+"


@functools.cache
def run(lesson_id: str):
    return lesson(lesson_id).run()


@functools.cache
def shown(chapter_id: str):
    chapter = CHAPTERS[chapter_id]
    names = {chapter.lesson, chapter.payoff, chapter.contrast, chapter.payoff_contrast} - {None}
    view = one_line_legends(chapter_view(chapter, {name: run(name) for name in names}))
    go.Figure(view.chart)  # a valid Plotly figure
    return view


def trace(figure, name_start: str):
    (found,) = [t for t in figure["data"] if t["name"].startswith(name_start)]
    return found


def notes(figure) -> str:
    """The figure's notes, one a line, each note's own line breaks read as spaces."""
    return "\n".join(note["text"].replace("<br>", " ") for note in figure["layout"]["annotations"])


@pytest.mark.parametrize("chapter_id", LATE)
def test_each_short_claim_is_plain_words_and_every_line_is_named(chapter_id):
    view = shown(chapter_id)
    claim = lesson(CHAPTERS[chapter_id].lesson).claim(run(CHAPTERS[chapter_id].lesson))
    assert claim.holds and claim.short and unlinked(view.claim).endswith(claim.short)
    assert len(claim.short.split()) <= 40, claim.short
    assert not re.search(r"\d", re.sub(FORMAT_NAMES, "", claim.short)), claim.short
    assert view.chart["data"]
    assert all(t["name"] for t in view.chart["data"])
    # As every chart of the app: strict JSON, exponents not SI suffixes, and labels in the
    # palette's text colours, which the dark theme swaps for its own.
    json.dumps(view.chart, allow_nan=False)
    layout = view.chart["layout"]
    assert layout["xaxis"]["exponentformat"] == layout["yaxis"]["exponentformat"] == "e"
    assert {note["font"]["color"] for note in layout["annotations"]} <= set(DARK_PALETTE)


def scalings(tensor: np.ndarray, block: int = 32) -> dict:
    """One tensor's two float8 scalings, computed here: per tensor (E4M3, s = 448 / amax in
    float32) and per block of ``block`` (MXFP8: the E8M0 scale at or above amax / 448)."""
    values = tensor.astype(np.float32)
    nonzero = values != 0
    s = np.float32(E4M3.max) / np.abs(values).max()
    per_tensor = (values * s).astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
    lost = np.abs(per_tensor) < float(E4M3.smallest_normal)
    rows, columns = values.shape
    blocks = values.reshape(rows, columns // block, block)
    ratio = np.abs(blocks).max(-1) / np.float32(E4M3.max)
    # E8M0 rounds to the nearest power of two; MXFP8 rounds up, so a ratio above its nearest
    # E8M0 value takes the next one.
    nearest = ratio.astype(ml_dtypes.float8_e8m0fnu).astype(np.float64)
    exponents = np.log2(np.where(nearest < ratio, 2 * nearest, nearest))
    scaled = blocks / np.exp2(exponents)[..., None]
    elements = np.abs(scaled.astype(ml_dtypes.float8_e4m3fn).astype(np.float64))
    normal = (elements >= float(E4M3.smallest_normal)) & (np.abs(scaled) <= float(E4M3.max))
    return {
        "per_tensor_log2": float(-np.log2(np.float64(s))),
        "block_log2": exponents,
        "per_tensor_lost": lost[nonzero].mean(),
        "block_normal": normal.reshape(values.shape)[nonzero].mean(),
    }


@pytest.mark.parametrize(
    ("chapter_id", "tensor"),
    [
        ("block-scaling", lambda config: make_batch(config)[0]),
        ("swiglu-outlier", lambda config: block_tensors(config)["m"]),
    ],
)
def test_a_block_scaling_chapter_draws_both_scalings_of_the_same_tensor(chapter_id, tensor):
    chart = shown(chapter_id).chart
    config = run(CHAPTERS[chapter_id].lesson).config
    expected = scalings(tensor(config))
    per_tensor = trace(chart, "one scale per tensor")
    blocks = trace(chart, "one scale per block")
    assert per_tensor["y"] == pytest.approx([expected["per_tensor_log2"]] * 2, abs=1e-6)
    assert np.array_equal(blocks["y"], expected["block_log2"].ravel())
    # The shares in the legend, computed here by casting with ml_dtypes.
    assert f"loses {expected['per_tensor_lost']:.1%}" in per_tensor["name"]
    assert f"keeps {expected['block_normal']:.1%}" in blocks["name"]
    # The outlier's blocks (past the midpoint between the median block's log2 scale and the
    # largest), ringed and labelled: markers of their own, so they show among a thousand.
    scales = expected["block_log2"]
    outliers = np.argwhere(scales > (np.median(scales) + scales.max()) / 2)
    ring = trace(chart, "the outlier's block")
    assert ring["x"] == [row * scales.shape[1] + column for row, column in outliers]
    assert ring["marker"]["size"] >= 10
    if len(outliers) == 1:
        ((row, column),) = outliers
        assert ring["name"] == f"the outlier's block (row {row}, block {column})"
        assert f"the outlier's block: scale 2^{scales.max():g}" in notes(chart)
    else:
        assert f"the outlier's {len(outliers)} blocks: scales up to 2^{scales.max():g}" in notes(
            chart
        )
    # Every other block's scale sits far under the tensor's.
    others = np.delete(scales.ravel(), ring["x"])
    assert others.max() < expected["per_tensor_log2"] - 8


def test_the_swiglu_chapter_draws_the_tensor_its_claim_names_and_says_x_itself_is_kept():
    chart = shown("swiglu-outlier").chart
    assert chart["layout"]["title"]["text"].startswith("mlp.down's input")
    x = make_batch(run("swiglu-outlier").config)[0]
    assert f"x itself, one scale per tensor: {scalings(x)['per_tensor_lost']:.1%} lost" in notes(
        chart
    )


def _markers(chart, row: str) -> dict[str, str]:
    """operation -> the name of the trace that draws it on ``row``."""
    return {
        x: t["name"] for t in chart["data"] for x, y in zip(t["x"], t["y"], strict=True) if y == row
    }


def test_the_layer_norm_chapter_draws_the_norm_as_exercises_first_inf_and_autocast_finite():
    chart = shown("layernorm-float16").chart
    report = run("layernorm-overflow")
    exercise, autocast = _markers(chart, "exercise (float16)"), _markers(chart, "autocast")
    names = [op.name for op in report.operations]
    norm = next(op.name for op in report.operations if op.kind == "normalisation")
    # Exercise: finite up to the norm, an inf at the norm, finite after it (rows erased to 0).
    assert [exercise[name] for name in names] == [
        "float16: inf or NaN" if name == norm else "float16: finite" for name in names
    ]
    assert autocast[norm] == "float32: finite"
    assert all(kind.endswith(": finite") for kind in autocast.values())
    # The sizes compared, computed here in float64 from the run's parameters and batch.
    x, _ = make_batch(report.config)
    kernel = report.params["layers.0.kernel"].before.astype(np.float64)
    bias = report.params["layers.0.bias"].before.astype(np.float64)
    reach = np.abs(x.astype(np.float64) @ kernel + bias).max()
    bound = np.sqrt(float(np.finfo(np.float16).max))
    assert reach > bound
    assert f"Outputs reach {reach:.0f}, past sqrt(65504) = {bound:.1f}" in notes(chart)


def test_the_float16_attention_chapter_draws_the_scores_first_and_what_autocast_moves():
    chart = shown("attention-float16").chart
    exercise, autocast = _markers(chart, "exercise (float16)"), _markers(chart, "autocast")
    names = [op.name for op in run("attention-overflow").operations]
    crosses = [name for name in names if exercise[name].endswith("inf or NaN")]
    assert crosses[0] == "attention scores"
    assert autocast["attention scores"] == "float32: finite"
    first_under_autocast = next(n for n in names if autocast[n].endswith("inf or NaN"))
    assert f"first inf under autocast: {first_under_autocast}" in notes(chart)
    # The largest score, computed here in float64 from the block's float32 scores.
    scores = block_tensors(run("attention-overflow").config)["scores"].astype(np.float64)
    largest = np.abs(scores).max()
    assert largest > np.finfo(np.float16).max
    assert f"scores reach {largest:.3g}, past float16's 65504" in notes(chart)


def test_the_bfloat16_attention_chapter_draws_every_operation_finite_beside_float16():
    chart = shown("attention-bfloat16").chart
    report = run("bfloat16-attention")
    bfloat16, float16 = _markers(chart, "bfloat16"), _markers(chart, "float16")
    assert set(bfloat16.values()) == {"bfloat16: finite"}
    names = [op.name for op in report.operations]
    assert next(n for n in names if float16[n].endswith("inf or NaN")) == "attention scores"
    relative = abs(report.mixed_initial_loss - report.float32_initial_loss) / abs(
        report.float32_initial_loss
    )
    largest = float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert f"under bfloat16's {largest:.3g}" in notes(chart)
    assert f"({relative:.2%} apart)" in notes(chart)


def test_the_loss_chapter_draws_both_losses_on_the_bfloat16_values_around_them():
    chart = shown("loss-rounds").chart
    report = run("classification-rounds")
    low, high = report.mixed_initial_loss_in_compute_dtype, report.mixed_initial_loss_in_float32
    grid = np.array(chart["layout"]["xaxis"]["tickvals"])
    # Consecutive bfloat16 values (no value skipped), spanning both losses.
    as_bfloat16 = grid.astype(ml_dtypes.bfloat16)
    assert np.array_equal(as_bfloat16.astype(np.float64), grid)
    assert np.array_equal(np.diff(as_bfloat16.view(np.uint16)), np.ones(grid.size - 1))
    assert grid.min() < min(low, high) and max(low, high) < grid.max()
    assert trace(chart, "bfloat16: ")["x"] == [low] and low in grid
    assert trace(chart, "float32: ")["x"] == [high] and high not in grid
    spacing = float(np.spacing(ml_dtypes.bfloat16(low)))
    assert trace(chart, "bfloat16 values")["name"] == f"bfloat16 values ({spacing:g} apart here)"
    assert f"{abs(low - high) / high:.2%} from float32's" in notes(chart)


def test_the_loss_steps_chapter_draws_a_staircase_against_a_smooth_float32_curve():
    chart = shown("loss-steps").chart
    stairs, smooth = trace(chart, "exercise"), trace(chart, "autocast")
    exercise, autocast = np.array(stairs["y"]), np.array(smooth["y"])
    steps = exercise.size
    assert stairs["line"]["shape"] == "hv"
    # Every loss on the staircase is a bfloat16 value; few distinct, as the legend says.
    assert np.array_equal(exercise.astype(ml_dtypes.bfloat16).astype(np.float64), exercise)
    levels = np.unique(exercise).size
    assert levels <= steps // 2
    assert stairs["name"] == f"exercise, loss in bfloat16: {levels} values in {steps} steps"
    assert np.unique(autocast).size >= steps - 1 and np.all(np.diff(autocast) < 0)
    assert smooth["name"] == f"autocast, loss in float32: {np.unique(autocast).size} values"
    jumps = np.abs(np.diff(exercise))
    spacing = float(np.spacing(ml_dtypes.bfloat16(exercise[-1])))
    assert f"jumps by {jumps.max():g}; bfloat16 values here are {spacing:g} apart" in notes(chart)
    (note,) = chart["layout"]["annotations"]
    assert note["x"] == int(np.argmax(jumps)) + 2


def test_a_picture_whose_claim_does_not_hold_shows_the_condition():
    # The block-scaling chapter read on a bfloat16 step: no block scales to draw.
    chapter = CHAPTERS["block-scaling"]
    view = chapter_view(chapter, {"block-outlier": run("bfloat16-agrees")})
    assert "not taught here" in view.claim
    condition = "bfloat16 is not a block-scaled recipe"
    assert condition in view.claim and condition in notes(view.chart)
    assert view.chart["data"] == []


def test_an_operations_picture_on_a_run_without_an_overflow_labels_no_inf():
    # The layer-norm chapter read on activations that fit: the claim shows its condition, and
    # the picture, drawn from that run, marks no operation as inf.
    report = run_report(lesson("layernorm-overflow").config().replace(input_scale=1.0))
    view = chapter_view(CHAPTERS["layernorm-float16"], {"layernorm-overflow": report})
    claim = lesson("layernorm-overflow").claim(report)
    assert not claim.holds and claim.condition in view.claim
    assert "first inf" not in notes(view.chart)
    assert all(t["name"].endswith(": finite") for t in view.chart["data"])
