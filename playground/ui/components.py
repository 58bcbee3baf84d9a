"""The page's components, held by name in typed records, and the keys its events answer with.

Rule: a page event answers with a dict keyed by what it changes: a ``Notice``, ``Control`` or
``Chart`` key for one member of a family (the notice under field ``lr``, the control of ``lr``,
the chart ``loss_plot``), or the name of one of the Page's own components (``"headline"``).
``Page[key]`` is the component a key names, so the wiring never builds a name from a prefix.
Keys of different kinds never compare equal (``Notice("n") != Control("n")``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gradio as gr


@dataclass(frozen=True)
class Notice:
    """The notice under a field's control."""

    field: str


@dataclass(frozen=True)
class Control:
    """A field's control."""

    field: str


@dataclass(frozen=True)
class Chart:
    """A chart of the report, by its output name."""

    name: str


Key = Notice | Control | Chart | str


@dataclass
class Page:
    """Every component the page's own events read or write (see the module rule).

    ``controls`` and ``notices`` are keyed by field name (``data`` included); ``charts`` holds
    the report's charts on the page (above the tabs and in each section's tabs).
    """

    demo: gr.Blocks
    controls: dict[str, Any]
    notices: dict[str, gr.Markdown]
    loss_scale_exponent: gr.Slider
    loss_scale_presets: gr.Radio
    example_buttons: dict[str, gr.Button]  # by lesson id
    status: gr.Markdown
    headline: gr.Markdown
    magnitudes: gr.Markdown
    reading: gr.Markdown
    operations: gr.Markdown  # the step's operations table, with the headline's numbers
    caption: gr.Markdown
    tabs: gr.Tabs
    summary: gr.JSON
    last_valid: gr.State
    open_tab: gr.State
    drawn: gr.State  # tab -> the inputs its charts show
    notices_shown: gr.State  # the fields whose notice is on the page
    charts: dict[str, gr.Plot] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)  # each section's record, by label
    route: Any = None  # the route's record (ui.route)

    def __getitem__(self, key: Key) -> Any:
        if isinstance(key, Notice):
            return self.notices[key.field]
        if isinstance(key, Control):
            return self.controls[key.field]
        if isinstance(key, Chart):
            return self.charts[key.name]
        return getattr(self, key)

    def inputs(self, names: tuple[str, ...]) -> list[Any]:
        """The controls of fields ``names`` (an endpoint's inputs, in its order)."""
        return [self.controls[name] for name in names]
