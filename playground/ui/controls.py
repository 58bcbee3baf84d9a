"""Controls, handler signatures and error mapping, all read from the settings table.

Rule: a control's kind, range, label, help and default come from the field's ``Bounds``; an
endpoint's inputs are table fields, in table order, named as the API names them (``seed`` for
``model_seed``), with the table's defaults; a ConfigError from the core becomes a ``gr.Error``
with the same message (field and allowed range), without a traceback in the server log.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

import gradio as gr
from gradio.components.plot import PlotData

from playground.core.settings import ConfigError, StepConfig, defaults, settings
from playground.core.user_data import UserData
from playground.ui.uploads import user_data

DEFAULTS = defaults()
# The API's name of a field where it differs from the field's own.
API_NAMES = {"model_seed": "seed"}
# Inputs of the step, sweep and export events: every field but the training-run settings.
# Settings added after the uploaded `data` input existed: the API takes them after `data`, so
# every older positional call (settings, then the file) keeps its meaning.
LATE_FIELDS = ("fp8_scaling", "amax_history", "pure_rounding")
# Every setting of the step, sweep and export events (all but the training-run ones), and of
# the dynamics event, in the table's order.
STEP_SETTINGS = tuple(name for name, bounds in settings().items() if bounds.group != "dynamics")
ALL_SETTINGS = tuple(settings())


def api_order(fields: tuple[str, ...], extras: tuple[str, ...] = ("data",)) -> tuple[str, ...]:
    """An endpoint's inputs in the API's order: the settings that predate ``data`` (table
    order), the extras, then LATE_FIELDS."""
    early = tuple(name for name in fields if name not in LATE_FIELDS)
    return (*early, *extras, *(name for name in fields if name in LATE_FIELDS))


STEP_INPUTS = api_order(STEP_SETTINGS)
DYNAMICS_INPUTS = api_order(ALL_SETTINGS)
# The settings a positional call passes before `data` (the API's order up to the file).
STEP_FIELDS = STEP_INPUTS[: STEP_INPUTS.index("data")]
DYNAMICS_FIELDS = DYNAMICS_INPUTS[: DYNAMICS_INPUTS.index("data")]
SLIDERS = ("n", "d_in", "d_out", "steps", "hidden_layers")


@contextlib.contextmanager
def core_errors() -> Iterator[None]:
    """Turn the core's ConfigError into gr.Error with the same message (field and range)."""
    try:
        yield
    except ConfigError as error:
        # A visitor's typo is not a server fault: no traceback in the Space's log.
        raise gr.Error(str(error), title=f"Invalid {error.field}", print_exception=False) from None


def validated(values: dict[str, Any]) -> StepConfig:
    """The config from an event's named inputs (its settings fields); gr.Error on a bad one."""
    with core_errors():
        return StepConfig(**{name: values[name] for name in settings() if name in values})


def validated_data(values: dict[str, Any], config: StepConfig) -> UserData | None:
    """The visitor's uploaded data (the ``data`` input), parsed for config's d_out, or None."""
    with core_errors():
        return user_data(values.get("data"), config.d_out)


def table_handler(
    fields: tuple[str, ...], extras: tuple[str, ...] = ("data",)
) -> Callable[[Callable], Callable]:
    """Give ``fn(values: dict)`` the signature ``api_order(fields, extras)``: ``(seed, n, ...,
    data, <LATE_FIELDS among fields>)``.

    Fields take the table's defaults; ``extras`` (inputs that are no setting, such as the
    uploaded ``data`` file) default to None and come after the settings that predate them.

    The handler accepts the fields positionally (as the API and the page send them) or by
    keyword, fills omitted trailing ones with their defaults, and passes ``fn`` one dict keyed
    by field name. Gradio reads the signature, so the API documents the same names.
    """
    names = api_order(fields, extras)
    parameters = [
        inspect.Parameter(
            API_NAMES.get(name, name),
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=None if name in extras else DEFAULTS[name],
        )
        for name in names
    ]
    signature = inspect.Signature(parameters)

    def decorate(fn: Callable[[dict[str, Any]], Any]) -> Callable:
        @functools.wraps(fn)
        def handler(*args: Any, **kwargs: Any) -> Any:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return fn(dict(zip(names, bound.arguments.values(), strict=True)))

        handler.__signature__ = signature
        del handler.__wrapped__  # the table's signature, not fn's, is the handler's
        return handler

    return decorate


def control(name: str, **overrides: Any) -> gr.components.Component:
    """One input component for field ``name``: labelled in words, its ``elem_id`` the field name
    (what scripts and tests select it by)."""
    bounds = settings()[name]
    value = DEFAULTS[name]
    options = {"label": bounds.label, "elem_id": name, "value": value} | overrides
    if bounds.choices:
        return gr.Radio(list(bounds.choices), info=bounds.help, **options)
    info = f"{bounds.help} Allowed: {bounds.describe()}."
    if name in SLIDERS:
        # The class lets the page's script commit the slider's number box on Enter (see page.JS).
        return gr.Slider(
            bounds.low, bounds.high, step=1, info=info, elem_classes=["commit-slider"], **options
        )
    return gr.Number(info=info, precision=0 if bounds.integer else None, **options)


def commit_triggers(component: Any) -> list[Any]:
    """The events that commit a control's value: Enter or leaving a number, releasing a slider,
    picking a choice, uploading or clearing a file (never a keystroke or a programmatic set)."""
    if isinstance(component, gr.Slider):
        return [component.release]
    if isinstance(component, gr.Number):
        return [component.submit, component.blur]
    if isinstance(component, gr.File):
        return [component.upload, component.clear]
    return [component.input]


def as_plot(figure: dict[str, Any]) -> PlotData:
    """A Plotly JSON dict as gr.Plot's own PlotData, sent as is to Plotly.js."""
    return PlotData(type="plotly", plot=json.dumps(figure))


def plot_slot(label: str) -> gr.Plot:
    """An empty chart; the figure carries its own title, so the label is for screen readers."""
    return gr.Plot(label=label, show_label=False)
