"""Whether the sweep on the page still matches the controls, and the banner that says it does not.

Rule: a sweep is stale when some setting it ran with (its JSON ``config``) differs from the
control's value now, read as the settings table reads it (a control whose value is invalid
differs from every sweep). The banner names each differing setting by its control's label with
the value the sweep ran with and the value now, and offers the rerun; the page dims the sweep
under it (the class ``stale-banner``, as it does for the step's results). No sweep yet, or none
differing: no banner.

Example::

    >>> stale_fields({"lr": 0.1}, {"lr": 0.01})
    {'lr': (0.1, 0.01)}
"""

from __future__ import annotations

from typing import Any

from playground.core.settings.settings import ConfigError, check_setting, settings
from playground.views.labels import labelled

RERUN_LABEL = "Sweep again with the current settings"


def _now(name: str, value: Any) -> Any:
    """The control's value as the table reads it, or the raw value when it is invalid."""
    try:
        return check_setting(name, value)
    except ConfigError:
        return value


def stale_fields(ran_with: dict[str, Any] | None, controls: dict[str, Any]) -> dict[str, tuple]:
    """Field -> (the sweep's value, the control's value now), for every setting that differs."""
    table = settings()
    return {
        name: (held, controls[name])
        for name, held in (ran_with or {}).items()
        if name in table and name in controls and _now(name, controls[name]) != held
    }


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def stale_banner(ran_with: dict[str, Any] | None, controls: dict[str, Any]) -> str:
    """The banner over a stale sweep (see the module rule), or '' when it is current."""
    differing = stale_fields(ran_with, controls)
    if not differing:
        return ""
    then = labelled({name: held for name, (held, _) in differing.items()}, differing, _shown)
    now = labelled({name: value for name, (_, value) in differing.items()}, differing, _shown)
    return (
        f"<div class='stale-banner' role='status'><strong>Not updated</strong>: this sweep ran "
        f"with {then}; the controls now say {now}. Press <em>{RERUN_LABEL}</em> to sweep "
        "them.</div>"
    )
