"""Widget helpers, written once for every tab: controls read from the settings table, charts,
notices. A leaf of the page: it imports nothing from the page or its sections.

Rule: a control's kind, range, label, help and default come from the field's ``Bounds``, and its
``elem_id`` is the field name (what scripts and tests select it by); a chart is a ``gr.Plot``
fed a Plotly JSON dict as is (``as_plot``), the figure carrying its own title.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, NamedTuple, TypeVar

import gradio as gr

from playground.core.settings.settings import defaults, settings
from playground.ui.gradio_internals.parts import PlotData
from playground.views.chart_text import with_description

DEFAULTS = defaults()
# Integer fields shown as sliders; the others are number boxes or choices.
SLIDERS = ("n", "d_in", "d_out", "steps", "hidden_layers")
Views = TypeVar("Views", bound=NamedTuple)


def control(name: str, **overrides: Any) -> gr.components.Component:
    """One input component for field ``name``, labelled in words, its ``elem_id`` the field."""
    bounds = settings()[name]
    options = {"label": bounds.label, "elem_id": name, "value": DEFAULTS[name]} | overrides
    if bounds.choices:
        return gr.Radio(list(bounds.choices), info=bounds.help, **options)
    info = f"{bounds.help} Allowed: {bounds.describe()}."
    if name in SLIDERS:
        # The class lets the page's script commit the slider's number box on Enter (ui.assets).
        return gr.Slider(
            bounds.low, bounds.high, step=1, info=info, elem_classes=["commit-slider"], **options
        )
    return gr.Number(info=info, precision=0 if bounds.integer else None, **options)


def field_notice(name: str) -> gr.Markdown:
    """The notice under a control: the core's message when its value is invalid."""
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


def as_plot(figure: dict[str, Any]) -> PlotData:
    """A Plotly JSON dict as gr.Plot's own PlotData, sent to Plotly.js with its text
    alternative (``views.chart_text``)."""
    return PlotData(type="plotly", plot=json.dumps(with_description(figure)))


def plotted(views: Views, names: Iterable[str]) -> Views:
    """``views`` (a section's named outputs) with the figures ``names`` as gr.Plot's PlotData."""
    return views._replace(**{name: as_plot(getattr(views, name)) for name in names})


def plot_slot(label: str) -> gr.Plot:
    """An empty chart; the figure carries its own title, so the label is for screen readers."""
    return gr.Plot(label=label, show_label=False)


def quiet_progress(target: gr.State) -> dict[str, Any]:
    """An event's options for no progress shown, tracked on the State ``target`` alone.

    Gradio's front end keeps the loading status of every component an event ever tracked (its
    outputs, unless ``show_progress_on`` names others) and sets each of them again at every
    status change of any event, reading each one's data as it does: a chart's whole figure, a
    column's every child. A State holds no data in the browser and is found at once (States
    sit first in the layout tree: ``ui.gradio_internals.layout``)."""
    return {"show_progress": "hidden", "show_progress_on": [target]}
