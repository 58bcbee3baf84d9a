"""The pictures of route chapters 1-10 (playground.sections.route.pictures_step): each draws the
contrast its claim argues, with numbers computed here from the runs' raw arrays (numpy, float64);
each short claim is plain words without figures; a claim whose condition fails shows it."""

import functools
import math
import re

import numpy as np
import plotly.graph_objects as go
import pytest

from helpers import one_line_legends, unlinked
from playground.core.lessons import lesson
from playground.core.lessons.route import CHAPTERS, ROUTE
from playground.sections.route.view import chapter_view

EARLY = [chapter.id for chapter in ROUTE[:10]]
# What a short claim may hold that looks like a figure: format names, powers of two of a loss
# scale and S = 1.
ALLOWED = re.compile(r"b?float(?:16|32|8)|2\^\d+|S = 1\b")


@functools.cache
def run(lesson_id: str):
    return lesson(lesson_id).run()


def _runs(chapter_id: str) -> dict:
    chapter = CHAPTERS[chapter_id]
    names = {chapter.lesson, chapter.payoff, chapter.contrast, chapter.payoff_contrast} - {None}
    return {name: run(name) for name in names}


@functools.cache
def shown(chapter_id: str):
    return one_line_legends(chapter_view(CHAPTERS[chapter_id], _runs(chapter_id)))


def _names(figure) -> list[str]:
    return [trace.get("name", "") for trace in figure["data"]]


def _notes(figure) -> list[str]:
    return [note["text"] for note in figure["layout"].get("annotations", [])]


def _trace(figure, start: str) -> dict:
    (trace,) = [t for t in figure["data"] if t.get("name", "").startswith(start)]
    return trace


def _flat(report, field: str) -> np.ndarray:
    return np.concatenate([getattr(p, field).ravel() for p in report.params.values()])


@pytest.mark.parametrize("chapter_id", EARLY)
def test_each_short_claim_is_plain_words_and_its_picture_names_every_line(chapter_id):
    chapter = CHAPTERS[chapter_id]
    for name in filter(None, (chapter.lesson, chapter.payoff)):
        claim = lesson(name).claim(run(name))
        assert claim.holds and claim.short, name
        assert len(claim.short.split()) <= 40, (name, len(claim.short.split()))
        assert not re.search(r"\d", ALLOWED.sub("", claim.short)), (name, claim.short)
        assert claim.short in unlinked(shown(chapter_id).claim + shown(chapter_id).payoff)
    for figure in filter(None, (shown(chapter_id).chart, shown(chapter_id).payoff_chart)):
        go.Figure(figure)  # a valid Plotly figure
        assert all(_names(figure)), chapter_id


def test_range_precision_writes_the_kernel_gradients_error_on_the_scatter():
    kernel = run("bfloat16-agrees").kernel
    mixed, exact = kernel.mixed_grads.astype(np.float64), kernel.float32_grads.astype(np.float64)
    error = np.linalg.norm(mixed - exact) / np.linalg.norm(exact)
    (said,) = [t for t in _notes(shown("range-precision").chart) if "relative error" in t]
    assert f"(in norm): {error:.2e}" in said
    # torch's name beside ours: nn.Linear's weight is the kernel.
    assert _names(shown("range-precision").chart)[0].startswith("kernel (torch's weight; ")


def test_float16_no_scale_writes_the_share_flushed_and_names_its_payoffs_lines():
    report = run("float16-flush")
    mixed, exact = _flat(report, "mixed_grads"), _flat(report, "float32_grads")
    flushed = int(np.sum((mixed == 0) & (exact != 0)))
    said = f"{flushed:,} of {mixed.size:,} ({flushed / mixed.size:.0%}) flushed to 0"
    assert said in _notes(shown("float16-no-scale").chart)
    # The payoff draws float32 and the float16 run at S = 1, and no pure run (chapter 7's).
    payoff = shown("float16-no-scale").payoff_chart
    assert _names(payoff)[0] == "float32" and _names(payoff)[1].startswith("float16, S = 1")
    assert not any("pure" in name for name in _names(payoff))


def test_float16_loss_scale_draws_the_gradients_without_and_with_the_scale():
    figure = shown("float16-loss-scale").chart
    before, after = run("float16-flush"), run("float16-scaled")
    # S = 1's zeros, as the backward pass holds them, on the picture's "zeros" slot.
    stall = _trace(figure, "S = 1:")
    assert stall["y"][0] == int(np.sum(_flat(before, "scaled_grads") == 0))
    scaled = np.abs(_flat(after, "scaled_grads").astype(np.float64))
    normal = int(np.sum(scaled >= np.finfo(np.float16).tiny))
    assert any(f"{normal:,} of {scaled.size:,}" in note for note in _notes(figure))
    assert _trace(figure, "S = 2^15: scaled")["type"] == "bar"


def test_scale_too_large_draws_s_in_float16_beside_float32_and_the_largest_value():
    figure = shown("scale-too-large").chart
    bars = figure["data"][0]
    largest = float(np.finfo(np.float16).max)
    assert _names(figure)[1] == f"float16's largest value, {largest:g}"
    assert figure["data"][1]["x"] == [math.log2(largest)] * 2
    held = dict(zip(bars["y"], bars["text"], strict=True))
    loss = "in float16<br>(the exercise's loss)"
    with np.errstate(over="ignore"):
        assert held[f"S = 2^15 {loss}"] == f"{np.float16(2**15):g}"
        assert held[f"S = 2^16 {loss}"] == f"{np.float16(2**16)} in float16"
    assert held["S = 2^16 in float32<br>(GradScaler's scale)"] == f"{np.float32(2**16):g}"
    scaled = _flat(run("float16-overflow"), "scaled_grads")
    nan = int(np.isnan(scaled).sum())
    said = f"{nan:,} of {scaled.size:,} scaled gradient entries not finite ({nan:,} NaN, 0 inf)"
    assert said in figure["layout"]["title"]["text"]


def test_dynamic_scaling_annotates_each_skip_with_its_scale_and_the_final_one():
    dynamics = run("train-float16-dynamic")
    skipped = np.flatnonzero(dynamics.mixed_skipped)
    expected = [
        f"step {k + 1}: skipped at S = 2^{int(np.log2(dynamics.mixed_scale[k]))}, halved"
        for k in skipped
    ]
    notes = _notes(shown("dynamic-scaling").chart)
    assert [note for note in notes if ": skipped" in note] == expected
    assert f"ends at S = 2^{int(np.log2(dynamics.mixed_scale[-1]))}" in notes
    assert "log2 loss scale S (GradScaler's scale)" in _names(shown("dynamic-scaling").chart)


def _ratio(name: str) -> float:
    return float(re.search(r"ends at (?:about )?([\d.e+-]+) x", name).group(1))


def test_bfloat16_no_scale_trains_beside_the_stalled_float16_run():
    figure = shown("bfloat16-no-scale").chart
    stalled, trained = run("train-float16-unscaled"), run("train-bfloat16-unscaled")
    stall = _trace(figure, "float16, S = 1")
    assert np.isclose(stall["y"][-1], stalled.mixed_loss[-1], rtol=1e-6)
    for trace, dynamics in ((stall, stalled), (_trace(figure, "bfloat16, S = 1"), trained)):
        ratio = np.float64(dynamics.mixed_loss[-1]) / np.float64(dynamics.float32_loss[-1])
        assert np.isclose(_ratio(trace["name"]), ratio, rtol=0.05), trace["name"]
    assert _ratio(stall["name"]) > 100
    # No "What changed in this one step" paragraph for two training runs.
    assert "What changed" not in shown("bfloat16-no-scale").payoff


def test_masters_pure_writes_the_share_of_updates_rounded_away():
    dynamics = run("train-pure-nearest")
    lost = float(np.mean(dynamics.pure_lost_share, dtype=np.float64))
    kept = np.float64(dynamics.pure_loss[-1]) / np.float64(dynamics.pure_loss[0])
    (said,) = _notes(shown("masters-pure").chart)
    assert f"{lost:.0%} of the updates per step rounded away" in said
    assert f"its loss ends at {kept:.0%} of its start" in said


@pytest.mark.parametrize(
    ("chapter_id", "remedy"),
    [("stochastic-rounding", "stochastic rounding"), ("kahan-summation", "Kahan summation")],
)
def test_a_remedy_trains_beside_the_stalled_round_to_nearest_run(chapter_id, remedy):
    figure = shown(chapter_id).chart
    nearest, pure = run("train-pure-nearest"), run(CHAPTERS[chapter_id].lesson)
    stall = _trace(figure, "pure bfloat16, round-to-nearest")
    assert np.isclose(stall["y"][-1], nearest.pure_loss[-1], rtol=1e-6)
    kept = np.float64(nearest.pure_loss[-1]) / np.float64(nearest.pure_loss[0])
    assert stall["name"].endswith(f"stalls at {kept:.0%} of its start")
    line = _trace(figure, f"pure bfloat16, {remedy}")
    ratio = np.float64(pure.pure_loss[-1]) / np.float64(pure.float32_loss[-1])
    assert np.isclose(_ratio(line["name"]), ratio, rtol=1e-3)


def test_float8_delayed_annotates_each_clipped_step_with_its_share():
    dynamics = run("train-float8-delayed")
    saturated = np.flatnonzero(dynamics.mixed_saturated_share)
    expected = [
        f"step {k + 1}: S doubled, {dynamics.mixed_saturated_share[k]:.2%} clipped"
        for k in saturated
    ]
    assert _notes(shown("float8-delayed").chart) == expected


def test_a_chapter_whose_condition_fails_shows_it_and_still_draws_its_runs():
    # Chapter 6 read on the float16 run at S = 1: it stalls, so bfloat16's claim does not hold.
    chapter = CHAPTERS["bfloat16-no-scale"]
    runs = {chapter.lesson: run("train-float16-unscaled"), chapter.contrast: run(chapter.contrast)}
    view = chapter_view(chapter, runs)
    claim = lesson(chapter.lesson).claim(runs[chapter.lesson])
    assert not claim.holds and "not taught here" in view.claim
    assert claim.condition in view.claim and claim.short not in view.claim
    # The line of the run whose claim fails carries no ending of its own.
    assert _names(view.chart)[1] == "float16, S = 1"
