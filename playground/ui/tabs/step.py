"""The step section's place on the page: the headline above the tabs and a tab per chart group.

Rule: ``build`` lays out one tab per entry of the section's ``TABS`` (each tab's id its label),
holding the charts it names; the page draws them on view from the section's ``FIGURES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from playground.sections.step import tab as step_tab
from playground.ui.components import Page
from playground.ui.widgets import plot_slot


@dataclass
class StepTabs:
    """The step section's components: its charts by output name (no controls of its own)."""

    charts: dict[str, gr.Plot]
    controls: dict[str, gr.components.Component] = field(default_factory=dict)


def build_headline() -> gr.Markdown:
    """The losses and their reading, at the top of the results."""
    return gr.Markdown(elem_id="headline", label="losses")


def build() -> StepTabs:
    """The section's tabs (call inside ``gr.Tabs``)."""
    charts = {}
    for label, names in step_tab.TABS.items():
        with gr.Tab(label, id=label):
            for name in names:
                charts[name] = plot_slot(step_tab.PLOT_LABELS[name])
    return StepTabs(charts)


def wire(page: Page, tabs: StepTabs) -> None:
    """None of its own: the page's step events draw these charts (``ui.page_events``)."""
