"""Pinned runs: earlier training runs kept beside the current one, named by what differs.

Rule:
    pin       ``pinned(pins, run)`` adds ``run`` last; a pin with the very same settings is
              replaced (pinning twice keeps one); at most MAX_PINS are kept, the oldest dropped
    names     a pin is named by the settings in which it differs from the current run, the
              current run by those in which any pin differs from it, in the settings table's
              order, each by its control's label (``loss scale = 1, pure-run rounding =
              kahan``, as the stale banners write settings: ``views.labels``): a setting two
              pins share with the current run is never named; a run whose settings all agree
              with the current run's is ``same settings``
    drawn     a pinned curve equal to the current run's same curve (same steps, same values,
              NaN where it is NaN) is not drawn again: the notes say it coincides

Only curves are kept (``RunCurves``): a session holds at most MAX_PINS of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from playground.sections.dynamics.curves import RunCurves
from playground.views.labels import labelled

MAX_PINS = 4
# A colour per pin (the current run keeps the section's own colours): purple, teal, brown and
# grey, each a line at least 3:1 (WCAG's contrast for graphics) on the light and dark charts.
PIN_COLORS = ("#9467bd", "#2a8a86", "#a0785a", "#808080")
SAME = "same settings"


def pinned(pins: Sequence[RunCurves], run: RunCurves) -> tuple[RunCurves, ...]:
    """``pins`` with ``run`` added last (see the rule)."""
    kept = [pin for pin in pins if dict(pin.settings) != dict(run.settings)]
    return (*kept, run)[-MAX_PINS:]


def differing(runs: Sequence[RunCurves]) -> list[str]:
    """The settings whose text differs among ``runs``, in the first run's order."""
    if len(runs) < 2:
        return []
    names = dict.fromkeys(name for run in runs for name in run.settings)
    return [name for name in names if len({run.settings.get(name) for run in runs}) > 1]


def run_name(run: RunCurves, fields: Sequence[str]) -> str:
    """``run`` named by ``fields`` (``loss scale = 1, compute dtype = float16``)."""
    return labelled(run.settings, fields) or SAME


def names(current: RunCurves, pins: Sequence[RunCurves]) -> tuple[str, list[str]]:
    """(the current run's name, each pin's name), by what differs from the current run."""
    own = [differing([pin, current]) for pin in pins]
    fields = differing([*pins, current])
    current_fields = [name for name in fields if any(name in f for f in own)]
    return run_name(current, current_fields), [
        run_name(pin, f) for pin, f in zip(pins, own, strict=True)
    ]


def same_curve(a: np.ndarray, b: np.ndarray) -> bool:
    """Two curves of the same length with equal values (NaN where the other is NaN)."""
    return a.shape == b.shape and bool(np.array_equal(a, b, equal_nan=True))


def pins_note(current: RunCurves | None, pins: Sequence[RunCurves]) -> str:
    """A Markdown list of the pins by name, with the curves each shares with the current run."""
    if not pins:
        return ""
    if current is None:
        pin_names = [run_name(pin, differing(pins)) for pin in pins]
        lines = [f"- pin {i}: {name}" for i, name in enumerate(pin_names, 1)]
        return f"**Pinned runs** ({len(pins)} of at most {MAX_PINS}):\n" + "\n".join(lines)
    current_name, pin_names = names(current, pins)
    lines = []
    for index, (pin, name) in enumerate(zip(pins, pin_names, strict=True), 1):
        shared = [
            run
            for run in ("float32", "mixed", "pure")
            if same_curve(pin.loss(run), current.loss(run))
        ]
        line = f"- pin {index}: {name}"
        if shared and len(shared) < 3:
            line += f" (its {' and '.join(shared)} loss curve is this run's: drawn once)"
        elif shared:
            line += " (every curve is this run's: drawn once)"
        lines.append(line)
    return (
        f"**Pinned runs** ({len(pins)} of at most {MAX_PINS}, oldest dropped), drawn beside "
        f"this run ({current_name}):\n" + "\n".join(lines)
    )
