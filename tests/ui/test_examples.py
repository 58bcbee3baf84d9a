"""The lesson buttons' answers (playground.ui.examples), called without a server: a claim is
shown only when its condition holds; otherwise the caption gives the condition and the button
says the lesson does not hold here."""

import numpy as np
import pytest

from playground.core.lessons import Claim, DynamicsLesson
from playground.core.lessons import lesson as lessons_by_id
from playground.ui import examples

SMALL = {"n": 32, "d_in": 8, "d_out": 4, "steps": 5}


def _lesson(holds: bool) -> DynamicsLesson:
    def claim_on(run):
        final = float(run.float32_loss[-1])
        return Claim(f"float32 ends at {final:.4g}.", f"float32 final {final:.4g} checked", holds)

    return DynamicsLesson(f"a-small-run-{holds}".lower(), "a small run", SMALL, claim_on)


@pytest.fixture
def lessons(monkeypatch):
    """The training lessons replaced by one that holds and one that does not."""
    lessons = {each.id: each for each in (_lesson(True), _lesson(False))}
    monkeypatch.setattr(examples, "TRAINING_LESSONS", lessons)
    examples.training_run.cache_clear()
    yield
    examples.training_run.cache_clear()


def test_a_holding_lesson_shows_its_sentence_and_the_run(lessons):
    answer = examples.trained("a-small-run-true", ())
    run = examples.training_run("a-small-run-true")
    final = f"{float(run.float32_loss[-1]):.4g}"
    assert answer["caption"]["value"] == f"**a small run.** float32 ends at {final}."
    assert answer["caption"]["visible"] is True
    assert "value" not in answer["button"]  # the label stays
    assert answer["dynamics_json"]["steps"] == 5
    assert answer["shown_run"].settings["steps"] == "5"
    np.testing.assert_array_equal(answer["shown_run"].float32_loss, run.float32_loss)


def test_a_lesson_whose_condition_fails_is_not_taught(lessons):
    answer = examples.trained("a-small-run-false", ())
    caption = answer["caption"]["value"]
    assert "Not taught here" in caption and "float32 final" in caption
    assert "float32 ends at" not in caption  # the sentence itself is not shown
    assert answer["button"]["value"] == "a small run" + examples.NOT_HELD


def test_step_captions_follow_the_same_rule():
    lesson = lessons_by_id("float16-scaled")  # its claim fails on the unscaled step
    unscaled = lessons_by_id("float16-flush").run()
    assert examples.caption_text(lesson, unscaled).startswith(f"**{lesson.label}.** Not taught")
    scaled = lesson.run()
    assert examples.caption_text(lesson, scaled) == (
        f"**{lesson.label}.** {lesson.claim(scaled).sentence}"
    )
