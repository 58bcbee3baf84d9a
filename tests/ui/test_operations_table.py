"""The operations table on the page (``#operations-table``): every commit and every lesson
fills it from the run it shows; a refused commit leaves it (dimmed with the other results); the
precision lessons are lesson buttons pointing at it."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest

from playground.core.data.synthetic import make_batch
from playground.core.lessons import PRECISION_LESSONS
from playground.core.lessons import lesson as lesson_by_id
from playground.core.settings.settings import StepConfig
from playground.ui import page_events
from playground.ui.arguments import STEP
from playground.ui.components import Control
from playground.ui.examples import LESSONS, caption_text
from playground.ui.widgets import DEFAULTS

SMALL = {"n": 32, "d_in": 8, "d_out": 4}


def _values(**changes) -> dict:
    return {name: DEFAULTS[name] for name in STEP.order if name in DEFAULTS} | {
        "data": None,
        **SMALL,
        **changes,
    }


def _rows(table: str) -> list[list[str]]:
    """The table's body rows, cell by cell."""
    lines = [line for line in table.splitlines() if line.startswith("| ")][1:]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines]


def test_a_commit_fills_the_table_and_the_loss_in_both_dtypes():
    answer = page_events.commit(_values(task="classification"), None)
    assert "operations" in page_events.COMMIT_OUTPUTS
    table = answer["operations"]
    # The default linear model under the exercise preset: every operation in bfloat16.
    assert _rows(table) == [
        ["dense", "matmul", "bfloat16", "finite", "finite", "finite"],
        ["softmax cross-entropy", "loss", "bfloat16", "finite", "finite", "-"],
    ]
    assert "max-subtracted" in table
    # The loss of the same logits, recomputed here in float64 from bfloat16-rounded operands,
    # is the float32 one the table quotes (to the float32 step's own rounding).
    config = StepConfig(**{k: v for k, v in _values(task="classification").items() if k != "data"})
    report = page_events.cached_report(config, None)
    x, y = make_batch(config)

    def bf16(values):
        return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)

    logits = bf16(bf16(x) @ bf16(report.kernel.before) + bf16(report.bias.before))
    shifted = logits - logits.max(-1, keepdims=True)
    expected = -np.mean((y * (shifted - np.log(np.exp(shifted).sum(-1, keepdims=True)))).sum(-1))
    quoted = r"same outputs: (\S+) computed in bfloat16, (\S+) in float32"
    low, high = re.search(quoted, table).groups()
    assert abs(float(high) - expected) <= 1e-5 * expected
    # The bfloat16 one is a bfloat16 number.
    assert float(ml_dtypes.bfloat16(float(low))) == float(low)


def test_a_refused_commit_leaves_the_table_as_it_was():
    answer = page_events.commit(_values(lr=-1.0), {"lr": 0.1})
    assert "operations" not in answer and answer["status"]["visible"] is True


def test_the_precision_lessons_are_buttons_that_show_the_table():
    assert all(lesson in LESSONS for lesson in PRECISION_LESSONS)  # buttons on the page
    assert all(lesson.target == "operations-table" for lesson in PRECISION_LESSONS)
    lesson = lesson_by_id("layernorm-overflow")
    answer = page_events.run_lesson(lesson, None)
    report = lesson.run()
    assert answer["caption"]["value"] == caption_text(lesson, report)
    assert lesson.claim(report).sentence in answer["caption"]["value"]
    norm = [row for row in _rows(answer["operations"]) if row[1] == "normalisation"]
    assert norm == [["norms.0", "normalisation", "float16", "**inf/NaN**", "finite", "finite"]]
    assert "forward, inf or NaN first appeared in norms.0" in answer["operations"]
    controls = {key.field: value for key, value in answer.items() if isinstance(key, Control)}
    assert all(controls[name] == value for name, value in lesson.overrides.items())


@pytest.mark.slow
def test_a_precision_lesson_on_a_run_that_does_not_show_it_is_not_taught():
    lesson = lesson_by_id("layernorm-overflow")  # on inputs too small for an overflow
    config = lesson.config().replace(input_scale=1.0, **SMALL)
    caption = caption_text(lesson, page_events.cached_report(config, None))
    assert caption.startswith(f"**{lesson.label}.** Not taught here")
    assert "largest first-layer output" in caption and "mean(x^2)" not in caption
