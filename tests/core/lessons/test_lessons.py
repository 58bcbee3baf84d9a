"""Every lesson is a claim checked on its own run (playground.core.lessons): each lesson's
condition holds, the condition can fail, and the key facts are recomputed here independently
(float64 numpy, numpy float16, PyTorch's GradScaler)."""

import functools
import inspect
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from stated_figures import NOISE_SPREAD, about, significant_digits, states, stopped

from playground import make_batch
from playground.core.lessons import (
    DYNAMICS_LESSONS,
    DYNAMICS_TAB,
    ENDING_LESSONS,
    GRAD_SCALER_INIT,
    LESSONS,
    PRECISION_LESSONS,
    RUN_FIELDS,
    STEP_LESSONS,
    TRANSFORMER_LESSONS,
    Claim,
    lesson,
)

LESSONS_PAGE = Path(__file__).resolve().parents[3] / "docs" / "lessons.md"
FLOAT16 = np.finfo(np.float16)


@functools.cache
def run(lesson_id: str):
    """The run of the lesson ``lesson_id`` (a step report or a training run), once."""
    return lesson(lesson_id).run()


def trained(lesson_id: str):
    return lesson(lesson_id), run(lesson_id)


def test_every_lesson_has_one_slug_id_and_every_list_is_in_the_registry():
    every = (
        *STEP_LESSONS,
        *PRECISION_LESSONS,
        *TRANSFORMER_LESSONS,
        *ENDING_LESSONS,
        *DYNAMICS_LESSONS,
    )
    assert list(LESSONS) == [each.id for each in every]  # no id twice
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", each.id) for each in every)
    assert all(LESSONS[each.id] is each for each in every)
    with pytest.raises(ValueError, match="no lesson 'float17'; the lessons are bfloat16-agrees"):
        lesson("float17")


@pytest.mark.parametrize("lesson_id", [each.id for each in STEP_LESSONS])
def test_every_step_lesson_holds(lesson_id):
    claim = lesson(lesson_id).claim(run(lesson_id))
    assert type(claim) is Claim and claim.holds, claim.condition


@pytest.mark.slow
@pytest.mark.parametrize("lesson_id", [each.id for each in DYNAMICS_LESSONS])
def test_every_training_lesson_holds(lesson_id):
    lesson_ = lesson(lesson_id)
    claim = lesson_.claim(run(lesson_id))
    assert type(claim) is Claim
    assert claim.holds, claim.condition
    assert lesson_.tab == DYNAMICS_TAB
    assert (
        set(lesson_.run_inputs) == set(RUN_FIELDS) == {"steps", "mode", "period", "pure_rounding"}
    )
    assert not set(lesson_.step_overrides) & set(RUN_FIELDS)


def test_a_claim_fails_on_a_run_that_does_not_show_it():
    # The scaled lesson's claim on the unscaled run, and the reverse: neither holds.
    unscaled, unscaled_run = trained("train-float16-unscaled")
    scaled, scaled_run = trained("train-float16-scaled")
    assert not scaled.claim(unscaled_run).holds
    assert not unscaled.claim(scaled_run).holds
    assert "at least 100" in unscaled.claim(scaled_run).condition
    # A step lesson likewise: the S = 2^15 claim on the S = 1 step.
    assert not lesson("float16-scaled").claim(run("float16-flush")).holds


def test_float32_reaches_the_least_squares_floor_that_float16_at_s1_stalls_far_above():
    run_ = run("train-float16-unscaled")
    config = run_.config
    x, y = (a.astype(np.float64) for a in make_batch(config))
    design = np.hstack([x, np.ones((x.shape[0], 1))])
    best = np.linalg.lstsq(design, y, rcond=None)[0]
    floor = np.mean((design @ best - y) ** 2)
    assert run_.float32_loss[-1] == pytest.approx(floor, rel=0.01)
    # Where the float16 run stalls, each entry of d loss / d prediction, 2 r / (N D_out) at the
    # residual's root mean square r, is below half of float16's smallest subnormal: it rounds to 0.
    rms = np.sqrt(run_.mixed_loss[-1])
    assert 2 * rms / y.size < float(FLOAT16.smallest_subnormal) / 2
    assert run_.mixed_loss[-1] > 1000 * floor


def test_dynamic_scaling_starts_where_pytorch_does_and_that_scale_overflows_float16():
    init = inspect.signature(torch.amp.GradScaler.__init__).parameters["init_scale"].default
    assert GRAD_SCALER_INIT == init > float(FLOAT16.max)
    assert float(np.float16(GRAD_SCALER_INIT)) == np.inf
    run_ = run("train-float16-dynamic")
    assert run_.mixed_scale[0] == init and run_.mixed_scale[-1] == init / 2


def test_the_unscaled_float16_lesson_shows_the_flush_and_no_rounding_loss():
    # The meter's two counts where the lesson says: flushed late in the run, nothing rounded away.
    run_ = run("train-float16-unscaled")
    half = run_.steps // 2
    assert run_.mixed_flushed_share[:5].max() < 0.05 < 0.5 < run_.mixed_flushed_share[half:].mean()
    assert run_.mixed_lost_share.max() == 0


def test_sentences_carry_their_runs_numbers():
    # float32's floor, the stall and their ratio are losses that stopped moving: 2 significant
    # digits after "about", holding across XLA's CPU variations (stated_figures); the stall's
    # step to the nearest ten.
    lesson_, run_ = trained("train-float16-unscaled")
    sentence = lesson_.claim(run_).sentence
    float32, mixed = run_.float32_loss, run_.mixed_loss
    assert stopped(float32) and stopped(mixed)
    for before, value in (
        ("-> ", float32[-1]),
        ("its loss stays at ", mixed[-1]),
        (", ", mixed[-1] / float32[-1]),
    ):
        figure = about(sentence, before)
        assert significant_digits(figure) == 2 and states(figure, value, NOISE_SPREAD), figure
    above = np.flatnonzero(mixed > 1.1 * mixed[-1])
    step = int(re.search(r"from about step (\d+) on", sentence).group(1))
    assert step % 10 == 0 and abs(step - (above[-1] + 1)) <= 5
    step = lesson("float16-scaled")
    report = run("float16-scaled")
    flushed = sum(p.underflow_count for p in report.params.values())
    assert (
        f"{flushed:,} entries (of {sum(p.size for p in report.params.values()):,})"
        in step.claim(report).sentence
    )


def test_the_scaled_step_caption_no_longer_calls_subnormal_gradients_normal():
    report = run("float16-scaled")
    scaled = np.concatenate([p.scaled_grads.ravel() for p in report.params.values()])
    magnitude = np.abs(scaled)
    normal = int(np.sum(magnitude >= FLOAT16.smallest_normal))
    subnormal = int(np.sum((magnitude > 0) & (magnitude < FLOAT16.smallest_normal)))
    sentence = lesson("float16-scaled").claim(report).sentence
    assert f"{normal:,} ({normal / scaled.size:.0%}) land in float16's normal range" in sentence
    assert f"{subnormal:,} ({subnormal / scaled.size:.0%}) are subnormal" in sentence


def test_lessons_page_counts_the_float16_2_16_overflow_as_the_run_does():
    report = run("float16-overflow")
    assert report.config.loss_scale == 2.0**16 and report.config.compute_dtype == "float16"
    scaled = np.concatenate([p.scaled_grads.ravel() for p in report.params.values()])
    text = " ".join(LESSONS_PAGE.read_text().split())
    said = re.search(r"([\d,]+) NaN and ([\d,]+) inf of ([\d,]+) entries", text)
    assert said, "the lessons page's float16 2^16 sentence"
    nan, inf, total = (int(group.replace(",", "")) for group in said.groups())
    assert (nan, inf, total) == (np.isnan(scaled).sum(), np.isinf(scaled).sum(), scaled.size)
