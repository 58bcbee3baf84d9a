"""What a lesson is: a named scenario, the tab that shows it, and a claim checked on its run.

Rule: a lesson has a stable ``id`` (a short slug, lowercase words joined by hyphens: the page and
the tests find a lesson by it, never by its position in a list) and a ``label`` (its button's
text); a lesson's settings are overrides of the settings table's defaults (every other field at
its default); its run is one step (``run_report``) for a :class:`StepLesson`, a training run
(``run_dynamics``) for a :class:`DynamicsLesson`, whose run inputs (steps, mode, period,
pure_rounding) are settings like the others. Its claim is computed from that run alone: a
:class:`Claim` holds the sentence, written from the run's numbers, and the condition the
sentence rests on, with the numbers it compared and whether it holds. A lesson whose condition
does not hold must not be taught: the page shows the condition instead of the sentence.

A claim also has its ``short`` form, the route's: at most 40 plain words and no figures (the
route's picture carries them), and ``figures``, the numbers the claim computed on its run
beyond the report's own (a second preset's run, a curve), which the picture draws.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from playground.core.runs.train import DynamicsReport, run_dynamics
from playground.core.settings.settings import StepConfig, settings
from playground.core.step.report import StepReport, run_report

# The section tab that shows a training run (the page's tab label).
DYNAMICS_TAB = "Training dynamics"


@dataclass(frozen=True)
class Claim:
    """A lesson's sentence and the condition it rests on, both written from one run."""

    sentence: str
    condition: str
    holds: bool
    short: str = ""
    figures: Mapping[str, Any] = field(default_factory=dict)


def checked(
    sentence: str,
    tests: Sequence[tuple[str, bool]],
    short: str = "",
    figures: Mapping[str, Any] | None = None,
) -> Claim:
    """The claim ``sentence`` resting on ``tests`` ((what was compared, with its numbers; whether
    it is true) pairs): it holds when every test does. ``short`` and ``figures``: the module
    rule."""
    condition = "; ".join(text for text, _ in tests)
    holds = all(ok for _, ok in tests)
    return Claim(sentence, condition, holds, short, dict(figures or {}))


@dataclass(frozen=True)
class StepLesson:
    """One step run: its ``id`` and ``label``, ``overrides`` of the defaults, the tab that shows
    it (None: the figure above the tabs), the element brought into view, and its claim on the
    step's report."""

    id: str
    label: str
    overrides: dict[str, Any]
    tab: str | None
    target: str
    claim_on: Callable[[StepReport], Claim] = field(repr=False)

    def config(self) -> StepConfig:
        return StepConfig(**self.overrides)

    def run(self) -> StepReport:
        return run_report(self.config())

    def claim(self, report: StepReport | None = None) -> Claim:
        """The claim on ``report`` (this lesson's own run when None)."""
        return self.claim_on(report if report is not None else self.run())


# The settings of a training run itself (the dynamics group of the table): steps, mode, period,
# pure_rounding.
RUN_FIELDS = tuple(name for name, bounds in settings().items() if bounds.group == "dynamics")


@dataclass(frozen=True)
class DynamicsLesson:
    """One training run, shown in the Training dynamics tab: its ``id`` and ``label``,
    ``overrides`` of the defaults (the run's own inputs among them) and its claim on the run's
    report."""

    id: str
    label: str
    overrides: dict[str, Any]
    claim_on: Callable[[DynamicsReport], Claim] = field(repr=False)
    tab: str = DYNAMICS_TAB
    target: str = "dynamics-reading"

    def config(self) -> StepConfig:
        return StepConfig(**self.overrides)

    @property
    def step_overrides(self) -> dict[str, Any]:
        """The overrides of the step's settings (the controls above the tabs)."""
        return {k: v for k, v in self.overrides.items() if k not in RUN_FIELDS}

    @property
    def run_inputs(self) -> dict[str, Any]:
        """The run's own inputs (steps, mode, period, pure_rounding), defaults filled in."""
        config = self.config()
        return {name: getattr(config, name) for name in RUN_FIELDS}

    def run(self) -> DynamicsReport:
        return run_dynamics(self.config())

    def claim(self, report: DynamicsReport | None = None) -> Claim:
        """The claim on ``report`` (this lesson's own run when None)."""
        return self.claim_on(report if report is not None else self.run())
