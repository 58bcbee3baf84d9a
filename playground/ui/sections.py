"""The page's sections as a registry: the page builds, wires and draws each entry the same way.

Rule: a section is one ``Section`` entry of SECTIONS, in the order its tabs appear:

    label    what the section is called
    tabs     tab label -> the report's charts it holds (drawn when the tab is on view); none
             for a section laid out under the tabs (the tab bar holds one row at 1400 px)
    figures  chart name -> draw(report) -> Plotly dict, for every chart ``tabs`` names
    build    lays out its tabs (called inside ``gr.Tabs``; a section without tabs under it);
             returns its record of components, whose ``charts`` are the report's charts and
             ``controls`` its own settings
    wire     ``wire(page, record)``: its own events and endpoints
    checks   ``checks(page, record)``: its stale checks (``ui.components.StaleCheck``), which
             every commit of the step's controls answers; none when it shows no results of
             its own that a commit can make stale

Adding a tab is one entry here (and its module under ``ui/tabs``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playground.core.step.report import StepReport
from playground.sections.lab import tab as lab_tab
from playground.sections.step import block_map
from playground.sections.step import blocks as block_section
from playground.sections.step import tab as step_tab
from playground.ui.components import Page, StaleCheck
from playground.ui.tabs import blocks, compare, dynamics, lab, step, tensors


@dataclass(frozen=True)
class Section:
    """One section of the page (see the module rule)."""

    label: str
    tabs: dict[str, tuple[str, ...]]
    figures: dict[str, Callable[[StepReport], dict[str, Any]]]
    build: Callable[[], Any]
    wire: Callable[[Page, Any], None]
    checks: Callable[[Page, Any], list[StaleCheck]] | None = None


SECTIONS = (
    Section("step", step_tab.TABS, step_tab.FIGURES, step.build, step.wire),
    Section(
        "blocks",
        {block_section.BLOCK_TAB: (block_map.BLOCK_FIGURE,)},
        {block_map.BLOCK_FIGURE: block_map.block_scale_figure},
        blocks.build,
        blocks.wire,
    ),
    Section(
        "lab",
        {lab_tab.TAB_LABEL: tuple(lab_tab.FIGURES)},
        lab_tab.FIGURES,
        lab.build,
        lab.wire,
        lab.checks,
    ),
    Section(
        "dynamics",
        {dynamics.TAB_LABEL: ()},
        {},
        dynamics.build,
        dynamics.wire,
        dynamics.checks,
    ),
    Section("tensors", {tensors.TAB_LABEL: ()}, {}, tensors.build, tensors.wire),
    Section("compare", {}, {}, compare.build, compare.wire),
)
# Each tab's charts: tab label -> {chart name: draw(report)}.
TAB_FIGURES = {
    label: {name: section.figures[name] for name in names}
    for section in SECTIONS
    for label, names in section.tabs.items()
}
