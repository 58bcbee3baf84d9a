"""The route's ending: every format's gradient error on one step, and what each chapter showed.

Rule: the picture draws the ending lesson's figures (``core.lessons.ending``): one bar per
format, its height the kernel gradient's relative error against float32 (log axis), labelled
with the error and the format's significant bits; the float8 recipes share a colour, NVFP4 has
its own. The summary lists each chapter by its title with its short claim, written from that
chapter's run, or says the chapter's claim does not hold here; nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from playground.core.lessons import LESSONS
from playground.core.lessons.claim import Claim
from playground.core.lessons.route import ROUTE, Chapter
from playground.views.plotly import (
    FLOAT32_COLOR,
    MIXED_COLOR,
    OVERFLOW_COLOR,
    base_layout,
)

# The bars' colours: 16-bit formats, the float8 recipes, NVFP4.
FORMAT_COLORS = {
    "float16": FLOAT32_COLOR,
    "bfloat16": FLOAT32_COLOR,
    "float8": MIXED_COLOR,
    "mxfp8": MIXED_COLOR,
    "fp8_block": MIXED_COLOR,
    "nvfp4": OVERFLOW_COLOR,
}


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
                "marker": {"color": [FORMAT_COLORS.get(name, MIXED_COLOR) for name in names]},
                "text": [f"{errors[name]:.2g}<br>{bits[name]} bits" for name in names],
                "textposition": "outside",
                "cliponaxis": False,
                "name": "kernel gradient's relative error against float32",
                "hovertemplate": "%{x}: %{y:.3g}<extra></extra>",
            }
        ],
        "layout": base_layout(
            "Every format on one step: the gradient's distance from float32",
            "compute format (significant bits of its values)",
            "relative error (log)",
            yaxis={"type": "log", "title": {"text": "relative error (log)"}, "automargin": True},
            showlegend=False,
        ),
    }


PICTURES: dict[str, Callable[..., dict[str, Any]]] = {"formats": formats_figure}


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
