"""The route's ending: every format's gradient error on one step, and what each chapter showed.

Rule: the picture draws the ending lesson's figures (``core.lessons.ending``): one bar per
format, its height the kernel gradient's relative error against float32 (log axis), labelled
with the error and the format's significant bits, coloured by them (8 or more, 4 or more,
fewer: the 16-bit formats, the float8 recipes, the 4-bit one). The summary lists each chapter
by its title with its short claim, written from that chapter's run, or says the chapter's
claim does not hold here; nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from playground.core.lessons import LESSONS
from playground.core.lessons.claim import Claim
from playground.core.lessons.route import ROUTE, Chapter
from playground.sections.route.pictures import picture
from playground.views.plotly import (
    FLOAT32_COLOR,
    MIXED_COLOR,
    OVERFLOW_COLOR,
    base_layout,
)


def bits_color(bits: int) -> str:
    """A bar's colour by its format's significant bits (see the module rule)."""
    return FLOAT32_COLOR if bits >= 8 else MIXED_COLOR if bits >= 4 else OVERFLOW_COLOR


@picture("formats")
def formats_figure(chapter: Chapter, runs: Mapping[str, Any], claim: Claim) -> dict[str, Any]:
    """One bar per format: the kernel gradient's relative error against float32 on one step."""
    errors, bits = claim.figures["errors"], claim.figures["bits"]
    names = list(errors)
    return {
        "data": [
            {
                "type": "bar",
                "x": names,
                "y": [errors[name] for name in names],
                "marker": {"color": [bits_color(bits[name]) for name in names]},
                "text": [f"{errors[name]:.2g}<br>{bits[name]} bits" for name in names],
                "textposition": "outside",
                "cliponaxis": False,
                "name": "kernel gradient's relative error against float32",
                "hovertemplate": "%{x}: %{y:.3g}<extra></extra>",
            }
        ],
        "layout": base_layout(
            "Every format on one step: the gradient's distance from float32",
            "format (its significant bits)",
            "relative error (log)",
            yaxis={"type": "log", "title": {"text": "relative error (log)"}, "automargin": True},
            showlegend=False,
        ),
    }


def summary(runs: Mapping[str, Any]) -> str:
    """What each chapter of the route showed: its title and its short claim, from its run."""
    lines = []
    for number, chapter in enumerate(ROUTE, 1):
        if chapter.sums_up:
            continue
        lesson = LESSONS[chapter.lesson]
        claim = lesson.claim(runs[chapter.lesson])
        said = claim.short or claim.sentence if claim.holds else "its claim does not hold here."
        lines.append(f"{number}. **{chapter.title}**: {said}")
    return "**What the route showed**\n\n" + "\n".join(lines)
