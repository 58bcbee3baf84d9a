"""The route's pictures by the name a chapter gives (``Chapter.chart``).

Rule: a picture is a function of the chapter, its runs (lesson id -> run: its lesson, payoff
and contrasts) and its lesson's claim, returning a Plotly figure dict; ``@picture(name)``
registers one in ``PICTURES``. The modules that draw them (``pictures_step``,
``pictures_operations``, ``ending``) register on import; ``view`` imports them.
"""

from __future__ import annotations

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
