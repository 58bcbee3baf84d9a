"""A chapter of the route as the page shows it: where the learner is, the question, the checked
claim and the one chart that answers it, and the payoff beside them.

Rule: everything is written from the runs the caller passes (the chapter's lesson's run, and
its payoff's and contrasts' runs where the chapter names them, ``core.lessons.route``); nothing
is computed here. A claim is shown only when its condition holds; otherwise the view says so
and gives the condition with its numbers. A one-step chapter with a contrast says what changed
between the two steps (the kernel gradient's relative error against float32, in norm), since
in one step the loss itself barely moves; a payoff is its training lesson's claim and loss
curves, the payoff's contrast drawn beside (``pictures_step.payoff_picture``). Every chart is
fitted to a phone's width before it is shown (``_sized``): its title, notes, legend entries and
rows' labels on short lines, and its notes on the data reaching inwards from their points.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any

from playground.core.lessons import LESSONS, Claim
from playground.core.lessons.route import ROUTE, Chapter
from playground.core.runs.train import DynamicsReport
from playground.core.step.report import StepReport

# Each picture module registers its pictures as it is imported (``pictures``).
from playground.sections.route import ending, pictures_operations, pictures_step  # noqa: F401
from playground.sections.route.glossary import linked
from playground.sections.route.pictures import PICTURES, wrapped
from playground.sections.route.pictures_step import scale_text

Run = StepReport | DynamicsReport
# A chart's height in the route (px): a chapter's chart and its payoff's fit on one screen
# beside the chapter's text at 1400 x 1000.
CHART_HEIGHT = 300
# Characters of a legend entry's line (``legend_name``), of a title's and of a note's
# (``wrapped``): a phone draws the route's charts about 300 px wide.
LEGEND_LINE = 40
TITLE_LINE = 42
NOTE_LINE = 30
CATEGORY_LINE = 20
# A note of at most this many characters labels a region and stays centred on its point.
LABEL_CHARS = 16


@dataclass(frozen=True)
class ChapterView:
    """What the route shows for one chapter (Markdown, and Plotly figure dicts or None)."""

    counter: str
    question: str
    claim: str
    chart: dict[str, Any]
    payoff: str
    payoff_chart: dict[str, Any] | None


def counter(number: int) -> str:
    """Where the learner is: ``Chapter k of n``, ``number`` counting from 1."""
    return f"Chapter {number} of {len(ROUTE)}"


def question_text(chapter: Chapter, number: int, seen: set[str] | None = None) -> str:
    """The chapter's heading and question, its terms linked to the glossary (``seen``: as
    ``glossary.linked``)."""
    return f"### {number}. {chapter.title}\n{linked(chapter.question, seen)}"


def claim_markdown(
    label: str, claim: Claim, what: str = "Checked claim", seen: set[str] | None = None
) -> str:
    """A lesson's claim under its label (its short form where it has one: the picture carries
    the numbers; its terms linked to the glossary, ``seen`` as ``glossary.linked``), or why it
    is not taught here."""
    if claim.holds:
        return f"**{what}** ({label}): {linked(claim.short or claim.sentence, seen)}"
    return (
        f"**{what}** ({label}): not taught here, since this run's numbers do not meet its "
        f"condition ({claim.condition})."
    )


def _changed(contrast: StepReport, report: StepReport) -> str:
    """What one step changes though its loss barely moves: how far the kernel's gradient lands
    from float32's (relative error, in norm) at the contrast's scale and at this one."""
    before, after = contrast.kernel.norm_rel_error, report.kernel.norm_rel_error
    if after == 0 < before:
        moved = "exactly on float32's, unlike"
    elif after > 0 and before > after:
        ratio = before / after
        times = f"{ratio:,.0f}" if ratio >= 10 else f"{ratio:.2g}"
        moved = f"{times} times closer to float32's than"
    elif after > before:
        moved = "further from float32's than"
    else:
        moved = "as far from float32's as"
    return (
        "**What changed in this one step**: not the loss, but the gradient: at S = "
        f"{scale_text(report.config.loss_scale)} it lands {moved} at S = "
        f"{scale_text(contrast.config.loss_scale)} (relative error {after:.2g} against "
        f"{before:.2g})."
    )


def legend_name(name: str) -> str:
    """A legend entry longer than LEGEND_LINE characters on two lines, broken after its first
    colon or semicolon (else at a space): a horizontal legend clips what passes its chart's
    width, and a phone draws the route's charts 290 px wide."""
    if len(name) <= LEGEND_LINE or "<br>" in name:
        return name
    for mark in (": ", "; "):
        head, found, tail = name.partition(mark)
        if found and len(head) < LEGEND_LINE:
            return f"{head}{found.rstrip()}<br>{tail}"
    return "<br>".join(textwrap.wrap(name, LEGEND_LINE))


def _where(figure: dict[str, Any], x: Any) -> float | None:
    """Where ``x`` sits along the x axis's drawn values (0 left, 1 right), or None."""
    if isinstance(x, str):
        order = figure["layout"].get("xaxis", {}).get("categoryarray")
        if order and x in order:
            return list(order).index(x) / max(1, len(order) - 1)
        for trace in figure["data"]:
            values = list(trace.get("x") or [])
            if x in values:
                return values.index(x) / max(1, len(values) - 1)
        return None
    xs = [
        v
        for trace in figure["data"]
        for v in (trace.get("x") or [])
        if isinstance(v, int | float) and math.isfinite(v)
    ]
    if not xs or max(xs) == min(xs) or not isinstance(x, int | float):
        return None
    return (x - min(xs)) / (max(xs) - min(xs))


def _fitted_note(figure: dict[str, Any], note: dict[str, Any]) -> dict[str, Any]:
    """A note in lines of at most NOTE_LINE characters; one on the data that is longer than a
    label and names no side reaches inwards from its point (left of a point in the right
    third, right of one in the left third; centred on one between), so its text stays within
    a phone's chart."""
    text = note.get("text", "")
    fitted = note | {"text": wrapped(text, NOTE_LINE)}
    if note.get("xref") == "paper" or "xanchor" in note or len(text) <= LABEL_CHARS:
        return fitted
    where = _where(figure, note.get("x"))
    if where is None or 1 / 3 <= where <= 2 / 3:
        return fitted
    inwards = -1 if where > 2 / 3 else 1
    return fitted | {
        "xanchor": "right" if inwards < 0 else "left",
        "ax": inwards * abs(note.get("ax", 0)),
    }


def _short_categories(axis: dict[str, Any]) -> dict[str, Any]:
    """A category axis's labels in lines of at most CATEGORY_LINE characters (the plot keeps
    its width on a phone)."""
    order = axis.get("categoryarray")
    if axis.get("type") != "category" or not order or "ticktext" in axis:
        return axis
    return axis | {
        "tickmode": "array",
        "tickvals": list(order),
        "ticktext": [wrapped(str(name), CATEGORY_LINE) for name in order],
    }


def _sized(figure: dict[str, Any] | None) -> dict[str, Any] | None:
    """``figure`` at the route's height, fitted to a phone's width: its legend's long entries
    on two lines, its title in lines of at most TITLE_LINE characters (the top margin grown to
    hold them), its y axis's categories on short lines, its notes fitted (``_fitted_note``)."""
    if figure is None:
        return None
    data = [
        trace | {"name": legend_name(trace["name"])}
        if isinstance(trace.get("name"), str)
        else trace
        for trace in figure["data"]
    ]
    layout = figure["layout"] | {"height": CHART_HEIGHT}
    title = layout.get("title")
    if isinstance(title, dict) and isinstance(title.get("text"), str):
        text = wrapped(title["text"], TITLE_LINE)
        margin = layout.get("margin", {})
        lines = text.count("<br>") + 1
        font = title.get("font", {}) | {"size": 13}
        layout["title"] = title | {"text": text, "font": font}
        layout["margin"] = margin | {"t": max(margin.get("t", 0), 24 + 20 * lines)}
    if "yaxis" in layout:
        layout["yaxis"] = _short_categories(layout["yaxis"])
    if layout.get("annotations"):
        layout["annotations"] = [_fitted_note(figure, n) for n in layout["annotations"]]
    return figure | {"data": data, "layout": layout}


def chapter_view(chapter: Chapter, runs: dict[str, Run], number: int | None = None) -> ChapterView:
    """The view of ``chapter`` from ``runs`` (lesson id -> its run: the chapter's lesson and
    every payoff or contrast it names); ``number`` counts from 1 (its place in the route when
    None)."""
    number = number or ROUTE.index(chapter) + 1
    lesson, run = LESSONS[chapter.lesson], runs[chapter.lesson]
    claim = lesson.claim(run)
    seen: set[str] = set()  # the glossary terms linked so far: the question's, then the claim's
    question = question_text(chapter, number, seen)
    claimed = claim_markdown(lesson.label, claim, seen=seen)
    chart = PICTURES[chapter.chart](chapter, runs, claim)
    payoff: list[str] = []
    payoff_chart = None
    if chapter.contrast and isinstance(run, StepReport):
        payoff.append(_changed(runs[chapter.contrast], run))
    if chapter.payoff:
        trained = runs[chapter.payoff]
        payoff_claim = LESSONS[chapter.payoff].claim(trained)
        payoff.append(
            claim_markdown(
                LESSONS[chapter.payoff].label, payoff_claim, "What it does to the training", seen
            )
        )
        payoff_chart = pictures_step.payoff_picture(chapter, runs, payoff_claim)
    if chapter.sums_up:
        payoff.append(ending.summary(runs))
    return ChapterView(
        counter=counter(number),
        question=question,
        claim=claimed,
        chart=_sized(chart),
        payoff="\n\n".join(payoff),
        payoff_chart=_sized(payoff_chart),
    )
