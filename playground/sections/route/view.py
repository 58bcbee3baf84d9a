"""A chapter of the route as the page shows it: where the learner is, the question, the checked
claim and the one chart that answers it, and the payoff beside them.

Rule: everything is written from the runs the caller passes (the chapter's lesson's run, and
its payoff's and contrasts' runs where the chapter names them, ``core.lessons.route``); nothing
is computed here. A claim is shown only when its condition holds; otherwise the view says so
and gives the condition with its numbers. A one-step chapter with a contrast says what changed
between the two steps (the kernel gradient's relative error against float32, in norm), since
in one step the loss itself barely moves; a payoff is its training lesson's claim and loss
curves, the payoff's contrast drawn beside (``pictures_step.payoff_picture``).
"""

from __future__ import annotations

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
from playground.sections.route.pictures import PICTURES

Run = StepReport | DynamicsReport
# A chart's height in the route (px): a chapter's chart and its payoff's fit on one screen
# beside the chapter's text at 1400 x 1000.
CHART_HEIGHT = 300
# Characters of a legend entry's line (``legend_name``).
LEGEND_LINE = 40


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
    """What one step changes though its loss barely moves: the kernel gradient against float32."""
    before, after = contrast.kernel.norm_rel_error, report.kernel.norm_rel_error
    return (
        "**What changed in this one step**: not the loss, but the gradient. The kernel's "
        f"gradient differs from float32's by {before:.3g} (relative, in norm) at S = "
        f"{contrast.config.loss_scale:g} and by {after:.3g} at S = {report.config.loss_scale:g}."
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


def _sized(figure: dict[str, Any] | None) -> dict[str, Any] | None:
    """``figure`` at the route's height, its legend's long entries on two lines."""
    if figure is None:
        return None
    data = [
        trace | {"name": legend_name(trace["name"])}
        if isinstance(trace.get("name"), str)
        else trace
        for trace in figure["data"]
    ]
    return figure | {"data": data, "layout": figure["layout"] | {"height": CHART_HEIGHT}}


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
