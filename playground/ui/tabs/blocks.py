"""The block-scaling tab: its note above the map of block scales, both drawn on view.

Rule: ``build`` lays out the tab (its id its label, ``sections.step.blocks.BLOCK_TAB``) with the
note (``notes.NOTES``' entry for the tab, elem_id ``note-block-scaling``) and the scale map
(``BLOCK_FIGURE``); the page's step events write and draw them when the tab is on view, from
the report, like every step tab's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gradio as gr

from playground.sections.step.block_map import BLOCK_FIGURE
from playground.sections.step.blocks import BLOCK_TAB
from playground.sections.step.notes import note_id
from playground.ui.components import Page
from playground.ui.widgets import plot_slot


@dataclass
class BlockTab:
    """The tab's components: its note and its chart, by output name; no controls of its own."""

    charts: dict[str, gr.components.Component]
    controls: dict[str, gr.components.Component] = field(default_factory=dict)


def build() -> BlockTab:
    """The tab (call inside ``gr.Tabs``)."""
    with gr.Tab(BLOCK_TAB, id=BLOCK_TAB):
        note = gr.Markdown(elem_id=note_id(BLOCK_TAB), elem_classes=["tab-note"])
        chart = plot_slot("Block scales (log2) of the first layer's input and kernel")
    return BlockTab({note_id(BLOCK_TAB): note, BLOCK_FIGURE: chart})


def wire(page: Page, tab: BlockTab) -> None:
    """None of its own: the page's step events write the note and draw the chart."""
