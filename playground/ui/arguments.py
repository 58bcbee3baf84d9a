"""Each endpoint's arguments: their order in the API, their signature, and refusals as gr.Error.

Rule: an endpoint's inputs are settings fields, in the table's order, named as the API names
them (``seed`` for ``model_seed``), with the table's defaults; then its extras (inputs that are
no setting, such as the uploaded ``data`` file, default None); then the LATE fields, settings
added after ``data`` existed, in the order they were added. Every input comes after each input
that existed when it was added (``appended`` inputs after ``appended_after``; ``downloads`` as
``ui.downloads_input`` places it), so a positional call written at any time keeps its meaning.
A ConfigError from the core becomes a ``gr.Error`` with the same message (field and
allowed range), without a traceback in the server log.

    STEP.order      = (seed, n, ..., compute_dtype, model, ..., optimizer, data, fp8_scaling,
                       amax_history, precision_policy, task, norm, outlier_share,
                       outlier_scale, the Hadamard switch, ...)
                                              # /step, /sweep, /export, /downloads
    DYNAMICS.order  = STEP's settings with steps, mode, period in table order, data, then
                       fp8_scaling, amax_history, pure_rounding, precision_policy, task, norm,
                       outlier_share, outlier_scale, the Hadamard switch, ...
                                              # /dynamics

The LATE fields are the table's fields after ``optimizer``, the last one that existed when
``data`` was added (the table only appends).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import gradio as gr

from playground.core.data.user_data import UserData
from playground.core.settings.settings import ConfigError, StepConfig, settings
from playground.ui.uploads import user_data
from playground.ui.widgets import DEFAULTS

# The API's name of a field where it differs from the field's own.
API_NAMES = {"model_seed": "seed"}
# The last setting that existed when the uploaded `data` input was added.
BEFORE_DATA = "optimizer"
# Settings added after the uploaded `data` input existed, in the order they were added (the
# table's order, which only appends): the API takes them after `data`, in this order.
LATE_FIELDS = tuple(settings())[tuple(settings()).index(BEFORE_DATA) + 1 :]


@dataclass(frozen=True)
class Arguments:
    """One endpoint's inputs (see the module rule): ``fields`` in table order, then ``extras``."""

    fields: tuple[str, ...]
    extras: tuple[str, ...] = ("data",)
    # Inputs added later that are no late setting of this endpoint, (name, default): the
    # export's run settings and framework; they follow ``appended_after`` (the last of
    # LATE_FIELDS when they were added), and late settings added since follow them.
    appended: tuple[tuple[str, Any], ...] = ()
    appended_after: str | None = None

    @cached_property
    def order(self) -> tuple[str, ...]:
        """Every input, by field name, in the API's order: each input after every input that
        existed when it was added."""
        early = tuple(name for name in self.fields if name not in LATE_FIELDS)
        late = tuple(name for name in LATE_FIELDS if name in self.fields)
        cut = len(late) if self.appended_after is None else late.index(self.appended_after) + 1
        appended = tuple(name for name, _ in self.appended)
        return (*early, *self.extras, *late[:cut], *appended, *late[cut:])

    @cached_property
    def before_data(self) -> tuple[str, ...]:
        """The settings a positional call passes before the uploaded ``data`` file."""
        return self.order[: self.order.index("data")]

    @cached_property
    def signature(self) -> inspect.Signature:
        """The handler's signature, as Gradio documents the API: API names and defaults."""
        return inspect.Signature(
            [
                inspect.Parameter(
                    API_NAMES.get(name, name),
                    inspect.Parameter.POSITIONAL_OR_KEYWORD,
                    default=dict(self.appended).get(
                        name, None if name in self.extras else DEFAULTS.get(name)
                    ),
                )
                for name in self.order
            ]
        )

    def values(self, args: tuple) -> dict[str, Any]:
        """Positional inputs (the page sends them in ``order``) by field name."""
        return dict(zip(self.order, args, strict=False))

    def handler(self, fn: Callable[[dict[str, Any]], Any]) -> Callable:
        """``fn(values: dict)`` as an endpoint with ``signature``: it accepts the inputs
        positionally (as the API and the page send them) or by keyword, fills omitted trailing
        ones with their defaults, and passes ``fn`` one dict keyed by field name."""
        signature = self.signature

        @functools.wraps(fn)
        def endpoint(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return fn(dict(zip(self.order, bound.arguments.values(), strict=True)))

        endpoint.__signature__ = signature
        del endpoint.__wrapped__  # the table's signature, not fn's, is the endpoint's
        return endpoint


# Every setting of the step, sweep, export and downloads events (all but the training run's).
STEP = Arguments(tuple(name for name, bounds in settings().items() if bounds.group != "dynamics"))
DYNAMICS = Arguments(tuple(settings()))


@contextlib.contextmanager
def core_errors() -> Iterator[None]:
    """Turn the core's ConfigError into gr.Error with the same message (field and range)."""
    try:
        yield
    except ConfigError as error:
        # A client's typo is not a server fault: no traceback in the Space's log.
        raise gr.Error(str(error), title=f"Invalid {error.field}", print_exception=False) from None


def validated(values: dict[str, Any]) -> StepConfig:
    """The config from an event's named inputs (its settings fields); gr.Error on a bad one."""
    with core_errors():
        return StepConfig(**{name: values[name] for name in settings() if name in values})


def validated_data(values: dict[str, Any], config: StepConfig) -> UserData | None:
    """The client's uploaded data (the ``data`` input), parsed for config's d_out and task,
    or None."""
    with core_errors():
        return user_data(values.get("data"), config.d_out, config.task)
