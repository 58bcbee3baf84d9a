"""Settings as the page's controls name them, for the text around results (the stale banners).

Rule: a setting is written by its control's label from the settings table (``loss scaling``,
not ``mode``), then `` = `` and its value; a name the table does not hold (``data``) as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from playground.core.settings.settings import settings

# What isn't a setting of the table but is named beside them.
OTHER_LABELS = {"data": "data"}


def control_label(name: str) -> str:
    """The control's label of setting ``name`` (``learning rate`` for ``lr``)."""
    table = settings()
    return table[name].label if name in table else OTHER_LABELS.get(name, name)


def labelled(values: Mapping[str, Any], names: Iterable[str], shown=str) -> str:
    """``label = value`` for each of ``names``, comma-separated (``-`` for a missing value),
    each value written by ``shown``."""
    return ", ".join(
        f"{control_label(name)} = {shown(values[name]) if name in values else '-'}"
        for name in names
    )
