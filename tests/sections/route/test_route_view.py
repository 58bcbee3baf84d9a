"""A chapter's view (playground.sections.route.view), from runs computed here: the claim beside
its chart, the payoff beside them, a claim that does not hold shown as not taught."""

import functools

import numpy as np

from playground.core.lessons import lesson
from playground.core.lessons.route import CHAPTERS, ROUTE
from playground.sections.route.view import CHART_HEIGHT, chapter_view


@functools.cache
def run(lesson_id: str):
    return lesson(lesson_id).run()


def test_a_one_step_chapter_shows_its_claim_its_chart_and_where_it_is():
    chapter = CHAPTERS["scale-too-large"]
    shown = chapter_view(chapter, {"float16-overflow": run("float16-overflow")})
    number = ROUTE.index(chapter) + 1
    assert shown.counter == f"Chapter {number} of {len(ROUTE)}"
    assert shown.question.startswith(f"### {number}. A scale too large\n")
    claim = lesson("float16-overflow").claim(run("float16-overflow"))
    assert claim.holds and shown.claim.endswith(claim.sentence)
    assert lesson("float16-overflow").label in shown.claim
    assert shown.chart["layout"]["height"] == CHART_HEIGHT
    assert shown.chart["layout"]["title"]["text"].startswith("Gradient magnitudes")
    assert shown.payoff == "" and shown.payoff_chart is None and shown.table is None


def test_a_claim_the_run_does_not_show_is_not_taught():
    # The S = 2^16 chapter read on the S = 1 step: nothing overflows there.
    chapter = CHAPTERS["scale-too-large"]
    shown = chapter_view(chapter, {"float16-overflow": run("float16-flush")})
    assert "not taught here" in shown.claim and "not finite" in shown.claim
    assert "does not fit in float16 at all" not in shown.claim


def test_a_chapter_on_the_operations_shows_the_table():
    chapter = CHAPTERS["loss-rounds"]
    shown = chapter_view(chapter, {"classification-rounds": run("classification-rounds")})
    assert shown.chart is None and "| operation | kind | dtype |" in shown.table
    # The table's loss line quotes the run's two losses of the same logits.
    report = run("classification-rounds")
    assert f"{report.mixed_initial_loss_in_compute_dtype:.7g} computed in bfloat16" in shown.table


def test_the_loss_scale_chapter_shows_what_changed_and_the_training_it_leads_to():
    chapter = CHAPTERS["float16-loss-scale"]
    names = ("float16-scaled", "float16-flush", "train-float16-scaled", "train-float16-unscaled")
    runs = {name: run(name) for name in names}
    shown = chapter_view(chapter, runs)
    # The gradient against float32, in norm, computed here from the two steps' kernels.
    errors = []
    for name in ("float16-flush", "float16-scaled"):
        kernel = runs[name].kernel
        mixed, exact = kernel.mixed_grads.astype(np.float64), kernel.float32_grads
        errors.append(np.linalg.norm(mixed - exact) / np.linalg.norm(exact.astype(np.float64)))
    assert f"by {errors[0]:.3g} (relative, in norm) at S = 1 " in shown.payoff
    assert f"by {errors[1]:.3g} at S = 32768" in shown.payoff
    trained = lesson("train-float16-scaled").claim(runs["train-float16-scaled"])
    assert trained.holds and trained.sentence in shown.payoff
    # The payoff chart draws this run and, pinned beside it, the unscaled run that stalls.
    names = [trace.get("legendgrouptitle", {}).get("text") for trace in shown.payoff_chart["data"]]
    assert any(name and name.startswith("pinned: ") and "loss scale = 1" in name for name in names)
    stalled = runs["train-float16-unscaled"].mixed_loss[-1]
    drawn = [
        trace["y"][-1]
        for trace in shown.payoff_chart["data"]
        if trace.get("legendgroup") == "pin0" and trace.get("y") is not None
    ]
    assert any(np.isclose(y, stalled, rtol=1e-6) for y in drawn)
