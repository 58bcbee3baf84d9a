"""Widget helpers, written once for every tab: controls read from the settings table, charts,
field messages. A leaf of the page: it imports nothing from the page or its sections.

Rule: a control's kind, range, label, help and default come from the field's ``Bounds``, and its
``elem_id`` is the field name (what scripts and tests select it by); a chart is a ``gr.Plot``
fed a Plotly JSON dict as is (``as_plot``), the figure carrying its own title. A refused value's
message is the control's own ``info`` line, marked with the class INVALID (``field_message``),
so a setting needs no component of its own for it.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

import gradio as gr

from playground.core.settings.settings import defaults, settings
from playground.views.chart_text import with_description

DEFAULTS = defaults()
# Integer fields shown as sliders; the others are number boxes or choices.
SLIDERS = ("n", "d_in", "d_out", "steps", "hidden_layers")
# The class of a control whose value the page refused (its info line holds the message).
INVALID = "field-invalid"
Views = TypeVar("Views", bound=NamedTuple)


def control_info(name: str) -> str:
    """The help line under field ``name``'s label: its help, and for a number its range."""
    bounds = settings()[name]
    return bounds.help if bounds.choices else f"{bounds.help} Allowed: {bounds.describe()}."


def control_classes(name: str, invalid: bool = False) -> list[str]:
    """Field ``name``'s control's classes: ``commit-slider`` for a slider (the page's script
    commits its number box on Enter, ``ui.assets``), INVALID while it holds a refused value."""
    return (["commit-slider"] if name in SLIDERS else []) + ([INVALID] if invalid else [])


def control(name: str, **overrides: Any) -> gr.components.Component:
    """One input component for field ``name``, labelled in words, its ``elem_id`` the field."""
    bounds = settings()[name]
    options = {
        "label": bounds.label,
        "elem_id": name,
        "value": DEFAULTS[name],
        "info": control_info(name),
        "elem_classes": control_classes(name),
    } | overrides
    if bounds.choices:
        return gr.Radio(list(bounds.choices), **options)
    if name in SLIDERS:
        return gr.Slider(bounds.low, bounds.high, step=1, **options)
    return gr.Number(precision=0 if bounds.integer else None, **options)


def field_message(name: str, problem: str | None) -> dict[str, Any]:
    """The update of field ``name``'s control that shows ``problem`` (the core's message, which
    names the field and its allowed values) in place of its help line, marked INVALID; with
    None, the help line again, unmarked."""
    return gr.update(
        info=problem or control_info(name), elem_classes=control_classes(name, bool(problem))
    )


def sender(event: gr.EventData | None) -> str | None:
    """The elem_id of the component that sent ``event`` (its ``target``, which Gradio's front end
    passes along a chain of events); None when there is none."""
    return getattr(getattr(event, "target", None), "elem_id", None)


def field_notice(name: str) -> gr.Markdown:
    """The notice under a control that has no help line of its own (the data upload): the
    core's message when its value is invalid."""
    return gr.Markdown(visible=False, elem_id=f"{name}-notice", elem_classes=["field-notice"])


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


@dataclass(frozen=True)
class PlotlyJSON:
    """A Plotly figure already written as JSON: what gr.Plot takes as a plotly Figure.

    gr.Plot sends a plotly Figure as ``figure.to_json()``; this value answers that call with
    the JSON it holds, so a figure the views built as a dict is written once, by ``json.dumps``,
    instead of being validated again by ``plotly.graph_objects.Figure``.

    >>> PlotlyJSON('{"data": []}').to_json()
    '{"data": []}'
    """

    plot: str
    type: str = "plotly"

    def to_json(self) -> str:
        return self.plot


def as_plot(figure: dict[str, Any]) -> PlotlyJSON:
    """A Plotly JSON dict as a value for gr.Plot, sent to Plotly.js with its text alternative
    (``views.chart_text``)."""
    return PlotlyJSON(json.dumps(with_description(figure)))


def plotted(views: Views, names: Iterable[str]) -> Views:
    """``views`` (a section's named outputs) with the figures ``names`` as gr.Plot values."""
    return views._replace(**{name: as_plot(getattr(views, name)) for name in names})


def plot_slot(label: str) -> gr.Plot:
    """An empty chart; the figure carries its own title, so the label is for screen readers."""
    return gr.Plot(label=label, show_label=False)


# The page's States not yet placed (``states_first``); None outside a page being built.
_pending: list[gr.State] | None = None


def session_state(value: Any = None) -> gr.State:
    """A gr.State holding ``value``, placed first in the page's layout tree when made inside
    ``states_first`` (else where it is made)."""
    if _pending is None:
        return gr.State(value)
    state = gr.State(value, render=False)  # rendered by states_first, its events wired now
    _pending.append(state)
    return state


@contextlib.contextmanager
def states_first() -> Iterator[None]:
    """Place every ``session_state`` made inside it first in the page's layout tree.

    Rule: the page's first child is an invisible column; the States are rendered into it, in
    the order they were made, once the page is built (a State draws nothing). Gradio's front
    end finds a component, at every loading-status change of any event, by a depth-first walk
    of the layout tree, and a commit sends several States: first in the tree, each lookup ends
    after a few nodes (``bench/profile_commit.py`` counts them).
    """
    global _pending
    home = gr.Column(visible=False, elem_id="session-states")
    _pending = []
    try:
        yield
    finally:
        states, _pending = _pending, None
        with home:
            for state in states:
                state.render()


def quiet_progress(target: gr.State) -> dict[str, Any]:
    """An event's options for no progress shown, tracked on the State ``target`` alone.

    Gradio's front end keeps the loading status of every component an event ever tracked (its
    outputs, unless ``show_progress_on`` names others) and sets each of them again at every
    status change of any event, reading each one's data as it does: a chart's whole figure, a
    column's every child. A State holds no data in the browser and is found at once
    (``states_first``)."""
    return {"show_progress": "hidden", "show_progress_on": [target]}
