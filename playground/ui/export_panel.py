"""The export on the page: the framework, the button, the script, and the "PyTorch" note.

Rule: ``build`` lays the export out (inside the page's code accordion): the framework choice
(``#framework``: ``jax``, the page's numbers bit for bit, or ``pytorch``) beside the export
button, the note saying what differs in PyTorch for the current settings (``#export-pytorch``,
``views.export_note``), then the script (``#export-script``) and its file (``#export-file``).
``wire`` joins the button to the ``export`` endpoint with every input in ``EXPORT``'s order
(the step's controls, the training tab's run settings, the framework), and refreshes the note
from the same inputs on each export and each framework change, in a private event of its own
(it runs the step and its autocast estimate, ``core.export_autocast``, for the measured line),
so the endpoint's outputs stay the script and its file.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.export_autocast import autocast_new_loss
from playground.core.policy import recipe
from playground.core.report import run_report
from playground.core.settings import ConfigError, StepConfig
from playground.ui.components import Page
from playground.ui.endpoints import EXPORT, EXPORT_RUN_FIELDS, ExportOutputs, run_export
from playground.ui.fair_use import LANE_SLOTS
from playground.ui.uploads import user_data
from playground.views.export import FRAMEWORKS
from playground.views.export_note import pytorch_note


@dataclass
class ExportPanel:
    """The export's components, by the names of the outputs they show."""

    button: gr.Button
    framework: gr.Radio
    note: gr.Markdown
    script: gr.Code
    script_file: gr.File


def build() -> ExportPanel:
    """The export's components (see the rule)."""
    with gr.Row(equal_height=False):
        framework = gr.Radio(
            list(FRAMEWORKS),
            value=FRAMEWORKS[0],
            label="framework",
            info="jax: the page's numbers, bit for bit; pytorch: autocast and GradScaler",
            elem_id="framework",
        )
        button = gr.Button("Export this step and training run as a script", variant="primary")
    note = gr.Markdown(pytorch_note(StepConfig()), elem_id="export-pytorch")
    script = gr.Code(language="python", label="script", elem_id="export-script")
    script_file = gr.File(label="script (.py)", elem_id="export-file")
    return ExportPanel(button, framework, note, script, script_file)


@EXPORT.handler
def _note(values: dict[str, Any]) -> Any:
    """The note for the inputs' settings, with the page's mixed loss after the step and its
    estimate under autocast; left as it is while a setting or the upload is invalid (the
    export itself names the bad field)."""
    try:
        config = StepConfig(**{k: v for k, v in values.items() if k in _FIELDS})
        data = user_data(values.get("data"), config.d_out, config.task)
        if recipe(config.compute_dtype).plain_dtype is None:
            return pytorch_note(config)
        page_loss = run_report(config, data).mixed_new_loss
        return pytorch_note(config, page_loss, autocast_new_loss(config, data))
    except ConfigError:
        return gr.skip()


_FIELDS = set(StepConfig.__dataclass_fields__)


def wire(page: Page, panel: ExportPanel) -> None:
    """The ``export`` endpoint and the note's refresh (see the rule)."""
    run_controls = {
        name: component
        for record in page.sections.values()
        for name, component in getattr(record, "controls", {}).items()
    }
    every = page.controls | run_controls | {"framework": panel.framework}
    inputs = [every[name] for name in EXPORT.order]
    panel.button.click(
        run_export,
        inputs=inputs,
        outputs=[getattr(panel, name) for name in ExportOutputs._fields],
        api_name="export",
        preprocess=False,
        concurrency_limit=LANE_SLOTS,
    )
    for trigger in (panel.button.click, panel.framework.change):
        trigger(
            _note,
            inputs=inputs,
            outputs=panel.note,
            api_visibility="private",
            preprocess=False,
            concurrency_limit=LANE_SLOTS,
        )
    assert set(EXPORT_RUN_FIELDS) <= set(every), "the training tab holds the run's settings"
