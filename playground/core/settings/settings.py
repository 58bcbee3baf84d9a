"""The playground's settings: one validated value, :class:`StepConfig`, read from one table.

Rule: every input a user can set (browser, API, command line, and later the URL) is a field of
:class:`StepConfig`, the training-dynamics settings included; its fields are the table of
``playground.core.settings.fields``, each with a :class:`~playground.core.bounds.Bounds` in its
metadata. Defaults, validation, the UI's controls and the CLI's flags are all read from that
one table, so a limit or a default is written exactly once. What a model's options and work
are comes from its registry entry (``playground.core.model.models``).

Validation turns any bad value into a :class:`ConfigError` (a ``ValueError``) that names the
field and its allowed range, before any JAX code runs.

Example::

    >>> StepConfig(n=32, d_in=8, d_out=4, loss_scale=1024.0).loss_scale
    1024.0
    >>> StepConfig(n=0)
    Traceback (most recent call last):
    ...
    playground.core.bounds.ConfigError: n (batch rows N) must be an integer in [1, 4096]; got 0
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from playground.core.bounds import Bounds, ConfigError, shown
from playground.core.caps import (
    FLOAT32_MAX,
    LIBRARY_PERIOD,
    LOSS_SCALE_MAX,
    LOSS_SCALE_MIN,
    MAX_N,
    MAX_STEPS,
    MAX_WIDTH,
    SEED_MAX,
    SWEEP_BUDGET,
    WORK_BUDGET,
    WORK_FACTOR,
    steps_within_budget,
)
from playground.core.model.models import MODELS, NORMS, ModelChoice
from playground.core.model.optimizers import OptimizerChoice
from playground.core.settings.cost import check_step, run_step_work
from playground.core.settings.fields import (
    FP8_SCALINGS,
    PURE_ROUNDINGS,
    SCALING_MODES,
    SettingsTable,
)
from playground.core.settings.state_settings import check_promotion_interval

# Other modules import these from here (the settings' one public address); they live in caps,
# bounds and fields.
__all__ = [
    "FLOAT32_MAX",
    "FP8_SCALINGS",
    "LIBRARY_PERIOD",
    "LOSS_SCALE_MAX",
    "LOSS_SCALE_MIN",
    "MAX_N",
    "MAX_STEPS",
    "MAX_WIDTH",
    "PURE_ROUNDINGS",
    "SCALING_MODES",
    "SEED_MAX",
    "SWEEP_BUDGET",
    "WORK_BUDGET",
    "WORK_FACTOR",
    "Bounds",
    "ConfigError",
    "StepConfig",
    "check_setting",
    "defaults",
    "settings",
    "shown",
]


@dataclass(frozen=True)
class StepConfig(SettingsTable):
    """A validated, immutable description of one playground run.

    Its fields are :class:`~core.settings.fields.SettingsTable`'s; building one checks::

        each field        against its Bounds (range, choices, type)
        combinations      a norm or setting only where the model or recipe takes it
        one step's cost   work <= STEP_BUDGET and memory <= MEMORY_BUDGET
                          (``core.settings.cost.check_step``)

    Any failure raises ConfigError naming the field (``n`` or the model's size for the cost
    caps) and what fits.

    >>> config = StepConfig(lr=0.5)
    >>> config.lr, config.compute_dtype
    (0.5, 'bfloat16')
    >>> dataclasses.replace(config, n=32).n  # a changed copy is validated again
    32
    """

    def __post_init__(self) -> None:
        for name, bounds in settings().items():
            object.__setattr__(self, name, bounds.check(name, getattr(self, name)))
        if self.norm != NORMS[0] and not MODELS[self.model].takes_norm:
            takes = [name for name, spec in MODELS.items() if spec.takes_norm]
            raise ConfigError(
                "norm",
                f"norm (normalisation) must be {NORMS[0]} for the {self.model} model: only "
                f"{' and '.join(takes)} have a layer norm to turn on; got {self.norm!r}",
            )
        MODELS[self.model].check(self.model_choice)  # e.g. heads dividing hidden_width
        refusal = check_promotion_interval(self.promotion_interval)
        if refusal:
            raise ConfigError("promotion_interval", refusal)
        check_step(self)  # one step's work and memory (``core.settings.cost``), before any JAX code

    @property
    def shape(self) -> tuple[int, int, int]:
        """(N, D_in, D_out)."""
        return (self.n, self.d_in, self.d_out)

    @property
    def model_choice(self) -> ModelChoice:
        """The model and its options (only those that matter for it)."""
        choice = ModelChoice(
            self.model,
            self.hidden_layers,
            self.hidden_width,
            self.activation,
            self.norm,
            self.seq_len,
            self.heads,
        )
        return choice.normalized()

    @property
    def optimizer_choice(self) -> OptimizerChoice:
        """The optimizer and the dtype its state is stored in."""
        return OptimizerChoice(self.optimizer, self.moments_dtype)

    @property
    def model_work(self) -> int:
        """Multiply-adds of one forward matmul pass: N x the model's work per batch row (its
        registry entry's ``work``; N x D_in x D_out for the linear model). The work caps are
        counted in these."""
        return self.n * MODELS[self.model].work(self.model_choice, self.d_in, self.d_out)

    @property
    def max_steps(self) -> int:
        """The most training steps allowed for this model, shape and recipe: WORK_BUDGET over
        one step's work (``core.settings.cost.run_step_work``); 0 when one step is over it. The
        run's compile is a one-off and caps nothing (``core.settings.compile_cost``)."""
        return steps_within_budget(run_step_work(self))

    def check_run(self) -> StepConfig:
        """Self, after checking the cross-field cap of a training run; ConfigError on ``steps``
        (on ``n`` when one step alone is over the run's cap)."""
        if self.max_steps == 0:
            raise ConfigError(
                "n",
                f"n (batch rows N): one training step of this model ({run_step_work(self):,} "
                f"multiply-adds of work) is over the run's cap of "
                f"2^{math.log2(WORK_BUDGET):.3g}; got {self.n}. A smaller N or smaller "
                "widths fit.",
            )
        if self.steps > self.max_steps:
            shape = " x ".join(map(str, self.shape))
            raise ConfigError(
                "steps",
                f"steps (training steps) must be an integer in [1, {self.max_steps}] at "
                f"N x D_in x D_out = {shape} for this model (steps x its work, "
                f"{run_step_work(self):,} a step, <= 2^{math.log2(WORK_BUDGET):.3g}); "
                f"got {self.steps}. Fewer steps or a smaller shape fit.",
            )
        return self

    def replace(self, **changes: Any) -> StepConfig:
        """A new validated config with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return dataclasses.asdict(self)


def settings() -> dict[str, Bounds]:
    """The table: field name -> Bounds, in declaration order."""
    return {f.name: f.metadata["bounds"] for f in dataclasses.fields(StepConfig)}


def defaults() -> dict[str, Any]:
    """Field name -> default value."""
    return {f.name: f.default for f in dataclasses.fields(StepConfig)}


def check_setting(name: str, value: Any, bounds: Bounds | None = None) -> Any:
    """Return ``value`` coerced to the field's type, or raise ConfigError naming the field.

    ``bounds`` defaults to the field's own in the table; the rule is :meth:`Bounds.check`'s.
    """
    return (bounds or settings()[name]).check(name, value)
