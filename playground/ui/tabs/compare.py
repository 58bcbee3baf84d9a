"""The "Compare recipes" section and its endpoint ``compare``: every recipe on the page's step.

Rule: the endpoint takes /step's inputs (``arguments.STEP``'s fields, read from the settings
table, so a setting added there is an input here too), then, appended, ``param_count`` and
``tokens_per_batch`` (0: this model's; ``core.compare.memory.SIZE_FIELDS``), then a real
transformer's inputs (``ui.tabs.architecture.ARCHITECTURE_INPUTS``); it runs every registered
recipe with the core (``core.compare.comparison``), counts the transformer's memory
(``core.compare.architecture_ledger``) and returns the section's outputs
(``sections.compare.tab``; the transformer's ledgers under the JSON's ``architecture``), a
refusal gr.Error naming the field and what fits. It sits in an
accordion under the tabs (a ninth tab label would wrap the tab bar at 1400 px); its button is
the endpoint's trigger: it sends the page's controls as they stand and the two sizes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.core.compare.comparison import run_comparison
from playground.core.compare.memory import SIZE_FIELDS
from playground.sections.compare import tab as compare_tab
from playground.ui.arguments import STEP, Arguments, core_errors, validated, validated_data
from playground.ui.components import Page
from playground.ui.fair_use import LANE_SLOTS
from playground.ui.tabs import architecture
from playground.ui.widgets import plotted

LABEL = compare_tab.LABEL
# /compare's inputs: the step's, then the two sizes of the user's own model (appended after
# every setting of the step, so every /step input keeps its place), then a real transformer's.
COMPARE = Arguments(
    STEP.fields,
    appended=(*((name, 0) for name in SIZE_FIELDS), *architecture.ARCHITECTURE_INPUTS),
)


@COMPARE.handler
def run_compare(values: dict[str, Any]) -> compare_tab.CompareViews:
    """The ``compare`` endpoint: (JSON, reading, recipes' table, memory table, figure)."""
    config = validated(values)
    data = validated_data(values, config)
    with core_errors():
        memory = architecture.memory_of(values)  # refused before any step runs
        comparison = run_comparison(config, data, values["param_count"], values["tokens_per_batch"])
    views = compare_tab.compare_views(comparison, memory)
    return plotted(views, ("compare_plot",))


@dataclass
class CompareTab:
    """The section's components, by the names of the outputs they show; no step charts."""

    sizes: dict[str, gr.Number]
    run: gr.Button
    compare_json: gr.JSON
    compare_reading: gr.Markdown
    compare_table: gr.Markdown
    compare_memory: gr.Markdown
    compare_plot: gr.Plot
    architecture: architecture.ArchitecturePanel
    charts: dict[str, gr.Plot] = field(default_factory=dict)
    controls: dict[str, gr.components.Component] = field(default_factory=dict)


def _size(name: str) -> gr.Number:
    bounds = SIZE_FIELDS[name]
    return gr.Number(
        0,
        label=bounds.label,
        info=f"{bounds.help} Allowed: {bounds.describe()}.",
        precision=0,
        minimum=bounds.low,
        elem_id=name,
    )


def build() -> CompareTab:
    """The section: an accordion, closed until opened (call under ``gr.Tabs``)."""
    with gr.Accordion(LABEL, open=False, elem_id="compare"):
        gr.Markdown(compare_tab.INTRO, elem_id="compare-intro")
        with gr.Row(equal_height=False):
            sizes = {name: _size(name) for name in SIZE_FIELDS}
            run = gr.Button("Compare every recipe", variant="primary", elem_id="compare-run")
        reading = gr.Markdown(elem_id="compare-reading")
        table = gr.Markdown(elem_id="compare-table")
        plot = gr.Plot(label=compare_tab.FIGURE_LABEL, show_label=False, elem_id="compare-plot")
        gr.Markdown("#### Memory per parameter (bytes) and in total")
        memory = gr.Markdown(elem_id="compare-memory")
        panel = architecture.build()
        with gr.Accordion("Every number (JSON, as the API returns it)", open=False):
            summary = gr.JSON(label="comparison", elem_id="compare-json")
    return CompareTab(sizes, run, summary, reading, table, memory, plot, panel)


def wire(page: Page, tab: CompareTab) -> None:
    """The button: the page's controls in /compare's order, then the two sizes and the
    transformer's inputs; the transformer's own redraws (``ui.tabs.architecture.wire``)."""
    every = page.controls | tab.sizes | tab.architecture.inputs
    tab.run.click(
        run_compare,
        inputs=[every[name] for name in COMPARE.order],
        outputs=[getattr(tab, name) for name in compare_tab.CompareViews._fields],
        api_name="compare",
        preprocess=False,  # StepConfig and the sizes' Bounds check every value by name
        concurrency_limit=LANE_SLOTS,
        concurrency_id="compare",
        show_progress="minimal",
        show_progress_on=[tab.compare_reading],
    )
    architecture.wire(page.controls, tab.architecture, tab.run)
