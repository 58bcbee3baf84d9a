"""A chapter's view (playground.sections.route.view), from runs computed here: the claim beside
its chart, the payoff beside them, a claim that does not hold shown as not taught."""

import functools
import re
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from helpers import one_line_legends, unlinked
from playground.core.lessons import lesson
from playground.core.lessons.route import CHAPTERS, ROUTE
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.route import view as view_module
from playground.sections.route.view import CHART_HEIGHT, chapter_view
from playground.sections.step.operations import operations_markdown
from playground.sections.step.tab import headline


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
    # The route gives the claim's short form; its picture carries the numbers.
    assert claim.holds and claim.short and unlinked(shown.claim).endswith(claim.short)
    assert lesson("float16-overflow").label in shown.claim
    assert shown.chart["layout"]["height"] == CHART_HEIGHT
    assert shown.chart["layout"]["title"]["text"].startswith("The loss scale S in float16")
    assert shown.payoff == "" and shown.payoff_chart is None


def test_a_claim_the_run_does_not_show_is_not_taught():
    # The S = 2^16 chapter read on the S = 1 step: nothing overflows there.
    chapter = CHAPTERS["scale-too-large"]
    shown = chapter_view(chapter, {"float16-overflow": run("float16-flush")})
    assert "not taught here" in shown.claim and "not finite" in shown.claim
    assert "does not fit in float16 at all" not in shown.claim


def test_a_chapter_on_the_operations_draws_a_picture_and_its_table_stays_in_the_tab():
    chapter = CHAPTERS["loss-rounds"]
    shown = chapter_view(chapter, {"classification-rounds": run("classification-rounds")})
    assert shown.chart["layout"]["height"] == CHART_HEIGHT
    # The tab's table (the lesson's target) quotes the run's two losses of the same logits.
    report = run("classification-rounds")
    table = operations_markdown(report)
    assert "| operation | kind | dtype |" in table
    assert f"{report.mixed_initial_loss_in_compute_dtype:.7g} computed in bfloat16" in table


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
    assert errors[1] < errors[0]
    assert (
        f"at S = 2^15 it lands {errors[0] / errors[1]:,.0f} times closer to float32's than at "
        f"S = 1 (relative error {errors[1]:.2g} against {errors[0]:.2g})"
    ) in shown.payoff
    trained = lesson("train-float16-scaled").claim(runs["train-float16-scaled"])
    assert trained.holds and trained.short in unlinked(shown.payoff)
    # The payoff chart draws this run and, beside it, the unscaled run that stalls.
    (stall,) = [t for t in shown.payoff_chart["data"] if t["name"].startswith("float16, S = 1:")]
    stalled = runs["train-float16-unscaled"].mixed_loss[-1]
    assert np.isclose(stall["y"][-1], stalled, rtol=1e-6)


def _shown(chapter_id: str):
    chapter = CHAPTERS[chapter_id]
    names = {chapter.lesson, chapter.payoff, chapter.contrast, chapter.payoff_contrast} - {None}
    runs = {name: run(name) for name in names}
    return one_line_legends(chapter_view(chapter, runs)), runs


def _steps_noted(figure, after: str) -> list[int]:
    """The steps the picture's annotations name: ``step <k><after>``."""
    notes = [note["text"] for note in figure["layout"].get("annotations", [])]
    return [int(m.group(1)) for t in notes if (m := re.match(r"step (\d+)" + after, t))]


def _drawn_at(figure, name_start: str) -> list[int]:
    """The x of every nonzero point of the trace whose name starts with ``name_start``."""
    (trace,) = [t for t in figure["data"] if str(t.get("name", "")).startswith(name_start)]
    return [x for x, y in zip(trace["x"], trace["y"], strict=True) if y]


def test_the_float8_chapter_counts_its_clipped_steps_as_its_chart_does_and_names_every_line():
    shown, runs = _shown("float8-delayed")
    dynamics = runs["train-float8-delayed"]
    said = _steps_noted(shown.chart, ": S doubled")
    # The chart draws the share of saturated entries at the step its x axis counts.
    assert said == _drawn_at(shown.chart, "float8 entries saturated")
    assert said == (np.flatnonzero(dynamics.mixed_saturated_share) + 1).tolist()
    # Every line the chart draws is named in its legend: the pure float8 run's lost updates,
    # the masters' and the saturated share.
    names = [trace["name"] for trace in shown.chart["data"]]
    assert names == ["pure float8 (round-to-nearest)", "float32 masters", names[2]]


def test_the_dynamic_scaling_chapter_counts_its_skipped_steps_as_its_chart_does():
    shown, runs = _shown("dynamic-scaling")
    said = _steps_noted(shown.chart, ": skipped")
    (crosses,) = [t for t in shown.chart["data"] if t["name"].startswith("skipped update")]
    assert said == crosses["x"]
    assert said == (np.flatnonzero(runs["train-float16-dynamic"].mixed_skipped) + 1).tolist()


def test_the_layer_norm_lesson_quotes_its_table_and_says_why_later_rows_are_finite():
    report = run("layernorm-overflow")
    sentence = lesson("layernorm-overflow").claim(report).sentence
    table = operations_markdown(report)
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()}
    norm = next(op.name for op in report.operations if op.kind == "normalisation")
    assert "**inf/NaN**" in rows[norm]
    after = [op.name for op in report.operations][
        [op.name for op in report.operations].index(norm) + 1 :
    ]
    assert after and all("inf/NaN" not in rows[name] for name in after)
    # The table says why, and the claim's loss is the one the table shows.
    assert f"{norm} is marked for its variance, which is inf" in table
    loss = f"{report.mixed_initial_loss_in_compute_dtype:.7g}"
    assert f"The loss of the same outputs: {loss} computed in float16" in table
    assert f"the loss ({loss} in float16) stay finite" in sentence
    numbers = set(re.findall(r"\d+\.\d+", sentence))
    assert numbers <= set(re.findall(r"\d+\.\d+", table)) | {
        f"{np.sqrt(float(np.finfo(np.float16).max)):.1f}"
    }, numbers


@pytest.mark.parametrize("chapter_id", ["masters-pure", "stochastic-rounding", "kahan-summation"])
def test_a_training_chapters_step_says_why_its_bfloat16_loss_does_not_move(chapter_id):
    # The step the chapter opens (its training lesson's step settings): the loss table's mixed
    # line is computed in bfloat16 and shows no change; the note beside it gives the spacing
    # and float32's change, computed here.
    config = StepConfig(**lesson(CHAPTERS[chapter_id].lesson).step_overrides)
    report = run_report(config)
    assert report.mixed_new_loss == report.mixed_initial_loss
    spacing = float(np.spacing(ml_dtypes.bfloat16(report.mixed_new_loss)))
    moved = abs(report.float32_new_loss - report.float32_initial_loss)
    assert 0 < moved < spacing
    table = headline(report, [])
    assert f"values near {report.mixed_new_loss:.4g} are {spacing:.4g} apart" in table
    assert f"moved float32's loss by {moved:.3g}, less than that" in table


def test_the_block_scaling_chapters_step_says_its_loss_diverges_in_float32_too():
    report = run("block-outlier")
    assert report.float32_new_loss > 1e6 * report.float32_initial_loss
    table = headline(report, [])
    said = (
        f"the float32 twin's loss goes from {report.float32_initial_loss:.6g} to "
        f"{report.float32_new_loss:.6g}, so the step diverges in any precision"
    )
    assert f"{report.mixed_new_loss:.7g}" in table and said in table
    # Said beside the table, before what follows it.
    assert table.index(said) < table.index("The mixed step uses")


def test_a_chart_is_fitted_to_a_phone_title_notes_and_rows_on_short_lines():
    long_title = "Loss over the steps: pure bfloat16, stochastic rounding beside round-to-nearest"
    figure = {
        "data": [{"type": "scatter", "x": [0, 50, 100], "y": ["a", "b", "a"], "name": "run"}],
        "layout": {
            "title": {"text": long_title + "<br><sup>what the subtitle says, at some length</sup>"},
            "margin": {"t": 40},
            "yaxis": {"type": "category", "categoryarray": ["exercise in float16 (the loss)", "b"]},
            "annotations": [
                {
                    "text": "a note near the right end, long enough to wrap",
                    "x": 90,
                    "y": "a",
                    "ax": 30,
                },
                {
                    "text": "a note near the left end, long enough to wrap",
                    "x": 5,
                    "y": "a",
                    "ax": -30,
                },
                {"text": "a note in the middle, long enough to wrap", "x": 50, "y": "b"},
                {"text": "short label", "x": 99, "y": "b"},
                {"text": "a note that chose its side itself", "x": 99, "y": "b", "xanchor": "left"},
                {"text": "a note on the paper, " * 4, "x": 1, "y": 1, "xref": "paper"},
            ],
        },
    }
    fitted = view_module._sized(figure)
    layout = fitted["layout"]
    title_lines = layout["title"]["text"].split("<br>")
    assert all(len(re.sub("</?sup>", "", line)) <= view_module.TITLE_LINE for line in title_lines)
    # The words are all kept, in order, and each subtitle line stays a subtitle.
    assert re.sub(r"<br>|</?sup>", " ", layout["title"]["text"]).split() == (
        f"{long_title} what the subtitle says, at some length".split()
    )
    subtitle = [line.startswith("<sup>") and line.endswith("</sup>") for line in title_lines]
    assert subtitle == sorted(subtitle) and not subtitle[0] and subtitle[-1]
    assert layout["margin"]["t"] >= 20 * len(title_lines)
    notes = layout["annotations"]
    for note, original in zip(notes, figure["layout"]["annotations"], strict=True):
        assert all(len(line) <= view_module.NOTE_LINE for line in note["text"].split("<br>"))
        assert note["text"].replace("<br>", " ").split() == original["text"].split()
    # Inwards from its point: left of one in the right third, right of one in the left third.
    assert (notes[0]["xanchor"], notes[0]["ax"]) == ("right", -30)
    assert (notes[1]["xanchor"], notes[1]["ax"]) == ("left", 30)
    assert "xanchor" not in notes[2] and "xanchor" not in notes[3]  # centred; a label
    assert notes[4]["xanchor"] == "left"  # its own side kept
    assert layout["yaxis"]["ticktext"][0] == "exercise in float16<br>(the loss)"
    assert layout["yaxis"]["tickvals"] == ["exercise in float16 (the loss)", "b"]
    assert layout["height"] == CHART_HEIGHT
    assert figure["layout"]["title"]["text"].startswith(long_title)  # the input is untouched


@pytest.mark.parametrize(
    ("before", "after", "said"),
    [
        (1.0, 0.0, "exactly on float32's, unlike at S = 1"),
        (1.0, 0.001, "1,000 times closer to float32's than at S = 1"),
        (1.0, 0.5, "2 times closer to float32's than at S = 1"),
        (0.5, 1.0, "further from float32's than at S = 1"),
        (0.5, 0.5, "as far from float32's as at S = 1"),
    ],
)
def test_what_changed_says_which_way_the_gradient_moved(before, after, said):
    def report(error, scale):
        return SimpleNamespace(
            kernel=SimpleNamespace(norm_rel_error=error),
            config=SimpleNamespace(loss_scale=scale),
        )

    text = view_module._changed(report(before, 1.0), report(after, 2.0**15))
    assert f"at S = 2^15 it lands {said} (relative error {after:.2g} against {before:.2g})" in text
