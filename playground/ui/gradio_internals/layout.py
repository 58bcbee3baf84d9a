"""Where the page's States sit in Gradio's layout tree: first.

Rule: every ``gr.State`` of a page is moved, in creation order, to the front of the page's
top-level children once the page is built. A State draws nothing, so the page looks the same;
what changes is the browser's work. Gradio's front end (6.31) keeps a loading status for every
component an event ever tracked (its progress targets and its inputs) and, at every status change
of any event, looks each of them up by a depth-first walk of the layout tree from its root. The
page's States are created with their sections, most of them deep in the tree, and a commit
sends several of them, so each status change would walk most of the tree once per State;
first in the tree, each lookup ends after a few nodes (``bench/profile_commit.py`` counts the
nodes visited).

Past Gradio's documented API: a BlockContext's ``children`` and a Block's ``parent``.
"""

from __future__ import annotations

import gradio as gr
from gradio.blocks import BlockContext


def states_first(blocks: gr.Blocks) -> int:
    """Move every State under ``blocks`` to the front of its children (see the rule); the
    number moved."""
    states: list[gr.State] = []

    def collect(context: BlockContext) -> None:
        for child in list(context.children):
            if isinstance(child, gr.State):
                context.children.remove(child)
                states.append(child)
            elif isinstance(child, BlockContext):
                collect(child)

    collect(blocks)
    states.sort(key=lambda state: state._id)
    for state in states:
        state.parent = blocks
    blocks.children[:0] = states
    return len(states)
