"""The route's words, chapter by chapter, from runs computed here: each claim holds and is at
most 40 words in its short form, no text points at a place that differs between the desktop
and the phone ("the figure above"), every legend line fits a phone's chart, and every note's
background turns dark with the theme."""

from __future__ import annotations

import functools
import re

import pytest

from helpers import unlinked
from playground.core.lessons import LESSONS
from playground.core.lessons.route import ROUTE, reads
from playground.sections.route.view import chapter_view
from playground.views.plotly import CHART_BACKGROUND, DARK_PALETTE

MAX_CLAIM_WORDS = 40
LEGEND_LINE = 44  # characters: about 290 px at the legend's 12 px
# Words that place the picture: right on one layout, wrong on the other.
PLACES = re.compile(
    r"\b(?:figure|chart|picture|plot|bars?) (?:above|below)\b"
    r"|\b(?:above|below|beside) (?:it|this)\b|\b(?:to|on) the (?:right|left)\b",
    re.IGNORECASE,
)


@functools.cache
def _run(lesson_id: str):
    return LESSONS[lesson_id].run()


@pytest.mark.parametrize("chapter", ROUTE, ids=[chapter.id for chapter in ROUTE])
def test_each_chapter_claims_in_at_most_40_words_and_never_places_its_picture(chapter):
    lesson = LESSONS[chapter.lesson]
    claim = lesson.claim(_run(chapter.lesson))
    assert claim.holds, claim.condition
    assert claim.short and len(claim.short.split()) <= MAX_CLAIM_WORDS, claim.short
    shown = chapter_view(chapter, {name: _run(name) for name in reads(chapter)})
    for text in (shown.question, shown.claim, shown.payoff):
        assert not PLACES.search(unlinked(text)), text
    assert shown.chart["data"], chapter.id
    # Each legend line fits a chart a phone draws 290 px wide (a horizontal legend clips).
    for figure in filter(None, (shown.chart, shown.payoff_chart)):
        for trace in figure["data"]:
            lines = str(trace.get("name", "")).split("<br>")
            assert max(len(line) for line in lines) <= LEGEND_LINE, trace["name"]
        # A note's background is the chart's paper, which the dark theme swaps with its text
        # (a fixed white box would hold the dark theme's light text unread).
        for note in figure["layout"].get("annotations", ()):
            assert note.get("bgcolor", CHART_BACKGROUND) in DARK_PALETTE, note
