"""The page frame: the layout, the sections, the API endpoints and the URL, joined once.

Rule: this is the only module that joins every part of the page. It lays the page out
(``ui.layout``), wires the page's private step events (``ui.wiring``) with every section's
stale checks in their answers, each registered section's own events (``ui.sections``), the
step's API endpoints (``ui.endpoints``) and the URL state.

The API's ``step`` endpoint returns every output and raises gr.Error on a bad input; the page
runs its own private events instead: a commit (Enter, leaving a field, releasing a slider,
picking a choice, an example, a preset) answers with what is above the tabs, then the open
tab's charts; a bad value gets a notice under its field. The heavier ``sweep`` and ``dynamics``
run on a button.
"""

from __future__ import annotations

import gradio as gr

from playground.ui import export_panel
from playground.ui.arguments import STEP
from playground.ui.components import Page
from playground.ui.endpoints import StepOutputs, ping, run_downloads, run_step
from playground.ui.fair_use import LANE_SLOTS
from playground.ui.layout import ApiParts, build_layout
from playground.ui.public import PublicBlocks
from playground.ui.sections import SECTIONS
from playground.ui.url_state import wire_url_state
from playground.ui.widgets import commit_triggers, states_first
from playground.ui.wiring import wire_page_events

TITLE = "Mixed-Precision Step Playground"
__all__ = ["TITLE", "build_demo"]


def _wire_endpoints(page_inputs: list, page: Page, parts: ApiParts) -> None:
    """The step's API endpoints: ``step`` (its own hidden trigger), ``export``, ``downloads``."""
    step_outputs = [
        page.charts[name] if name in page.charts else getattr(page, name)
        for name in StepOutputs._fields
    ]
    parts.step_api.click(
        run_step,
        inputs=page_inputs,
        outputs=step_outputs,
        api_name="step",
        trigger_mode="always_last",
        preprocess=False,  # StepConfig checks every value and names the field on error
        concurrency_limit=LANE_SLOTS,
    )
    export_panel.wire(page, parts.export)
    parts.prepare.click(
        run_downloads,
        inputs=page_inputs,
        outputs=parts.files,
        api_name="downloads",
        preprocess=False,
        concurrency_limit=LANE_SLOTS,
    )
    gr.api(ping, api_name="ping")


def build_demo() -> gr.Blocks:
    """The page (see the module rule)."""
    # Files Gradio caches (uploads, downloads) are deleted hourly once an hour old.
    with PublicBlocks(title=TITLE, delete_cache=(3600, 3600)) as demo, states_first():
        page, parts = build_layout(demo)
        own_controls = {
            name: component
            for record in page.sections.values()
            for name, component in record.controls.items()
        }
        # The URL names what the results show: it is written when a step answer changes the
        # last valid settings, or a section's own setting is committed (never per keystroke).
        written = [page.last_valid.change] + [
            trigger for component in own_controls.values() for trigger in commit_triggers(component)
        ]
        url_read = wire_url_state(demo, parts.url, page.controls | own_controls, written)
        # The stale checks every commit answers, before the commits are wired.
        for section in SECTIONS:
            if section.checks is not None:
                page.checks.extend(section.checks(page, page.sections[section.label]))
        page.checks.extend(export_panel.checks(page, parts.export))
        wire_page_events(page, url_read)
        _wire_endpoints(page.inputs(STEP.order), page, parts)
        for section in SECTIONS:
            section.wire(page, page.sections[section.label])
    return demo
