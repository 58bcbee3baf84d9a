"""The route's pictures by the name a chapter gives (``Chapter.chart``).

Rule: a picture is a function of the chapter, its runs (lesson id -> run: its lesson, payoff
and contrasts) and its lesson's claim, returning a Plotly figure dict; ``@picture(name)``
registers one in ``PICTURES``. The modules that draw them (``pictures_step``,
``pictures_operations``, ``ending``) register on import; ``view`` imports them. ``wrapped``
breaks a title's or a note's text into short lines, for them and for the view.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from typing import Any

Picture = Callable[..., dict[str, Any]]
PICTURES: dict[str, Picture] = {}


def picture(name: str) -> Callable[[Picture], Picture]:
    """Register the decorated function as the picture ``name``."""

    def register(function: Picture) -> Picture:
        PICTURES[name] = function
        return function

    return register


def wrapped(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken at spaces (its own ``<br>``
    kept; a line set in ``<sup>`` stays in it on each of its lines): Plotly does not wrap a
    title's or a note's text itself."""
    lines = []
    for line in text.split("<br>"):
        sup = line.startswith("<sup>") and line.endswith("</sup>")
        inner = line[5:-6] if sup else line
        parts = textwrap.wrap(inner, width, break_long_words=False, break_on_hyphens=False)
        lines += [f"<sup>{part}</sup>" if sup else part for part in parts or [""]]
    return "<br>".join(lines)
