"""The pictures of the route's chapters on one step's gradients and on training runs (chapters
1-10): each draws the contrast its chapter's claim argues, with the claim's numbers as labels.

Rule: a picture is a function of the chapter, its runs (lesson id -> run: its lesson, payoff and
contrasts, ``core.lessons.route``) and its lesson's claim (whose ``figures`` hold what the claim
computed beyond the runs), returning a Plotly figure dict; nothing is computed here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

PICTURES: dict[str, Callable[..., dict[str, Any]]] = {}
