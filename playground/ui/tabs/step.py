"""The step section's place on the page: the headline above the tabs and a tab per chart group.

Rule: ``build`` lays out one tab per entry of the section's ``TABS`` (each tab's id its label),
holding its note (what to notice, ``notes.NOTES``) above the charts it names; the page writes
the note and draws the charts on view, from the section's ``NOTES`` and ``FIGURES``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from playground.sections.step import tab as step_tab
from playground.sections.step.notes import NOTES, note_id
from playground.ui.components import Page
from playground.ui.widgets import plot_slot


@dataclass
class StepTabs:
    """The step section's components: its charts and tab notes by output name (the notes'
    names are their elem_ids); no controls of its own."""

    charts: dict[str, gr.components.Component]
    controls: dict[str, gr.components.Component] = field(default_factory=dict)


def build_headline() -> gr.Markdown:
    """The losses and their reading, at the top of the results."""
    return gr.Markdown(elem_id="headline", label="losses")


def build() -> StepTabs:
    """The section's tabs (call inside ``gr.Tabs``)."""
    charts: dict[str, gr.components.Component] = {}
    for label, names in step_tab.TABS.items():
        with gr.Tab(label, id=label):
            if label in NOTES:
                charts[note_id(label)] = gr.Markdown(
                    elem_id=note_id(label), elem_classes=["tab-note"]
                )
            for name in names:
                charts[name] = plot_slot(step_tab.PLOT_LABELS[name])
    return StepTabs(charts)


def wire(page: Page, tabs: StepTabs) -> None:
    """None of its own: the page's step events draw these charts (``ui.page_events``)."""
