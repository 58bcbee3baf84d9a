"""The page's layout, top to bottom: intro and the route; the controls beside the results (the
headline and the key figure first, the reading and the operations table, then each
section's tabs); every lesson's button; the glossary; the JSON, downloads and code.

Rule: the controls column is read from the settings table (each control's help line holds a
refused value's message; the data upload, which has none, a notice under it); the
model accordion holds the fields the model registry names as options, between ``model`` and
``optimizer``; the tabs are each registered section's, in the registry's order, and a section
without tabs follows them. Every component
the events need comes back by name in a typed record.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.model.models import MODELS
from playground.core.recipes.registry import recipe_settings
from playground.core.settings.settings import LOSS_SCALE_MAX, LOSS_SCALE_MIN
from playground.sections.route import glossary
from playground.ui import export_panel, gathered_inputs, page_events, route
from playground.ui.components import Page
from playground.ui.examples import LESSONS, SCROLL_TARGET_ID, button_id
from playground.ui.export_panel import ExportPanel
from playground.ui.sections import SECTIONS
from playground.ui.tabs import lab, step
from playground.ui.url_state import UrlRow, build_url_row
from playground.ui.widgets import DEFAULTS, control, field_notice, session_state

# The page's first words: what it is, and where the terms are explained (the route follows).
INTRO = f"""
# Mixed-Precision Step Playground
One training step of a small model in low precision beside the same step in float32. New
words: see the {glossary.LINK}.
"""
# Above the free exploration: every control and every tab.
EXPLORE = "**Or explore freely** below."
# Under the results: each lesson's own button (the route's chapter picker opens them in order).
EVERY_LESSON = "**Every lesson on its own**: each button applies a chapter's settings and runs it."
LOSS_SCALE_MIN_EXPONENT = math.ceil(math.log2(LOSS_SCALE_MIN))
LOSS_SCALE_MAX_EXPONENT = math.floor(math.log2(LOSS_SCALE_MAX))
# The controls that carry the lessons, first in the controls column (beside the headline, and on
# a phone right above it): the compute dtype, the learning rate, the loss scale with its preset
# and power-of-two controls (all three on the first screen at 1400 x 1000), then the optimizer.
KEY_FIELDS = ("compute_dtype", "lr", "loss_scale", "optimizer")
# The fields of the "Model" accordion: the model and every model's options.
MODEL_FIELDS = (
    "model",
    *dict.fromkeys(option for spec in MODELS.values() for option in spec.options),
)
# The scaled recipes' own settings, as the recipe registry declares them.
SCALING_FIELDS = recipe_settings()
# Precision per operation: the preset, the task (its loss) and the MLP's norm.
OPERATION_FIELDS = ("precision_policy", "task", "norm")
# The precision of the optimizer's state and of the matmuls' accumulators.
STATE_FIELDS = ("moments_dtype", "accumulation", "promotion_interval")


@dataclass
class ApiParts:
    """The components of the endpoints below the results: downloads, the script, the step's
    own trigger, and the URL row."""

    prepare: gr.Button
    files: gr.File
    export: ExportPanel
    step_api: gr.Button
    url: UrlRow


def _controls_column(controls: dict[str, Any], notices: dict[str, Any]) -> tuple[Any, Any]:
    """The settings, the key ones first (``KEY_FIELDS``, in a column of their own that a phone
    lifts above the results), the data upload with its notice; returns the loss-scale exponent
    and preset controls."""

    def add(name: str) -> None:
        controls[name] = control(name)

    with gr.Column(elem_id="key-controls"):
        for name in KEY_FIELDS[:3]:
            add(name)
        presets = gr.Radio(
            list(page_events.LOSS_SCALE_PRESETS),
            label="loss scale presets",
            value=page_events.preset_of(DEFAULTS["loss_scale"]),
            elem_id="loss-scale-presets",
        )
        exponent = gr.Slider(
            LOSS_SCALE_MIN_EXPONENT,
            LOSS_SCALE_MAX_EXPONENT,
            value=page_events.exponent_of(DEFAULTS["loss_scale"]),
            step=1,
            label="loss scale as a power of two: log2 S",
            info="Release to set S = 2^k.",
            elem_id="loss-scale-exponent",
            elem_classes=["commit-slider"],
        )
        for name in KEY_FIELDS[3:]:
            add(name)
    with gr.Column(elem_id="more-controls"):
        with gr.Group():
            add("model_seed")
            add("data_seed")
        for name in ("n", "d_in", "d_out"):
            add(name)
        with gr.Accordion("Data magnitudes", open=False):
            for name in ("input_scale", "target_scale", "outlier_share", "outlier_scale"):
                add(name)
        controls["data"] = gr.File(
            label="your data (CSV): rows set N; columns headed y, y1, target... are the targets "
            "(else the last D_out), the rest set D_in; for classification the last column is "
            "the class (0 to D_out - 1)",
            file_types=[".csv"],
            elem_id="data",
        )
        notices["data"] = field_notice("data")
        with gr.Accordion("Model", open=False):
            for name in MODEL_FIELDS:
                add(name)
        with gr.Accordion("Float8 scaling", open=False):
            for name in SCALING_FIELDS:
                add(name)
        with gr.Accordion("Precision per operation", open=False):
            for name in OPERATION_FIELDS:
                add(name)
        with gr.Accordion("Optimizer state and accumulation", open=False):
            for name in STATE_FIELDS:
                add(name)
    return exponent, presets


def build_layout(demo: gr.Blocks) -> tuple[Page, ApiParts]:
    """Lay the page out inside ``demo``; its components by name."""
    # Hidden, and first in the tree after the States: the browser finds it soonest.
    gathered = gathered_inputs.box()
    gr.Markdown(INTRO, elem_id="intro")
    route_parts = route.build()
    gr.Markdown(EXPLORE, elem_id="explore")
    controls: dict[str, Any] = {}
    notices: dict[str, Any] = {}
    sections: dict[str, Any] = {}
    with gr.Row(equal_height=False, elem_id="workspace"):
        with gr.Column(scale=1, min_width=300, elem_id="controls"):
            exponent, presets = _controls_column(controls, notices)
        with gr.Column(scale=3, min_width=320, elem_id="results"):
            status = gr.Markdown(visible=False, elem_id="status")
            with gr.Row(equal_height=False):
                with gr.Column(scale=2, min_width=300):
                    headline = step.build_headline()
                with gr.Column(scale=3, min_width=300):
                    magnitudes = lab.build_counts()
            charts = {"magnitude_plot": lab.build_figure()}
            reading = gr.Markdown(elem_id="reading")
            # Which operation ran in which dtype, read with the headline's numbers (its loss
            # beside float32's); it dims with them when the results go stale.
            operations = gr.Markdown(elem_id="operations-table")
            caption = gr.Markdown(elem_id="example-caption", visible=False)
            with gr.Tabs(elem_id="sections", overflow_behavior="wrap") as tabs:
                for section in SECTIONS:
                    if section.tabs:
                        sections[section.label] = section.build()
                        charts |= sections[section.label].charts
            for section in SECTIONS:
                if not section.tabs:  # a section of its own under the tabs
                    sections[section.label] = section.build()
    gr.Markdown(EVERY_LESSON, elem_id="every-lesson")
    with gr.Row(elem_id="examples"):
        example_buttons = {
            lesson.id: gr.Button(lesson.label, size="sm", elem_id=button_id(lesson))
            for lesson in LESSONS
        }
    # Names the element the lesson just run points at, which the page then scrolls to
    # (``ui.wiring``).
    scroll_target = gr.JSON(visible=False, elem_id=SCROLL_TARGET_ID)
    gr.Markdown(glossary.GLOSSARY, elem_id=glossary.ANCHOR)
    with gr.Accordion("All numbers (JSON, as returned by the API) and downloads", open=False):
        summary = gr.JSON(label="summary")
        prepare = gr.Button("Prepare the gradients CSV and the JSON summary")
        files = gr.File(label="downloads", file_count="multiple", elem_id="downloads")
    with gr.Accordion("The code: rerun this step and run in JAX or PyTorch", open=False):
        export = export_panel.build()
    # The `step` API endpoint's own trigger: scripts call it, the page never clicks it.
    step_api = gr.Button(visible=False)
    url = build_url_row()
    page = Page(
        demo=demo,
        controls=controls,
        notices=notices,
        loss_scale_exponent=exponent,
        loss_scale_presets=presets,
        example_buttons=example_buttons,
        scroll_target=scroll_target,
        status=status,
        headline=headline,
        magnitudes=magnitudes,
        reading=reading,
        operations=operations,
        caption=caption,
        tabs=tabs,
        summary=summary,
        last_valid=session_state(None),
        open_tab=session_state(page_events.FIRST_TAB),
        drawn=session_state({}),
        notices_shown=session_state([]),
        charts=charts,
        sections=sections,
        route=route_parts,
        gathered=gathered,
    )
    return page, ApiParts(prepare, files, export, step_api, url)
