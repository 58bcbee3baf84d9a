"""Training results that no longer match the controls: which settings differ, and the banner.

Rule: the shown run was computed with ``computed`` (every setting as text, and ``data``, as
``curves.settings_text`` writes them); the controls say ``now``. The results are stale when a
setting's text differs; the banner then names each differing setting by its control's label
(``views.labels``) with the value the results were computed with and the value the controls
hold, and offers the run (the Train button). The page dims whatever sits beside a
``stale-banner`` in the results' column, as it does for the step's results."""

from __future__ import annotations

from collections.abc import Mapping

from playground.views.labels import labelled

TRAIN_WORDS = "Train the three runs"


def stale_fields(computed: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """The settings whose text differs, in ``computed``'s order (then any only in ``now``)."""
    names = dict.fromkeys([*computed, *now])
    return [name for name in names if computed.get(name) != now.get(name)]


def stale_banner(computed: Mapping[str, str] | None, now: Mapping[str, str]) -> str:
    """The banner over stale training results (HTML), or "" when they match the controls or
    nothing was computed yet."""
    if not computed:
        return ""
    fields = stale_fields(computed, now)
    if not fields:
        return ""
    then, later = labelled(computed, fields), labelled(now, fields)
    return (
        "<div class='stale-banner'><strong>Not updated</strong>: the training results below "
        f"were computed with {then}; the controls now say {later}. Press "
        f"<strong>{TRAIN_WORDS}</strong> to train with the controls' settings.</div>"
    )
