"""The export on the page: the framework, the button, the script, and the "PyTorch" note.

Rule: ``build`` lays the export out (inside the page's code accordion): the framework choice
(``#framework``: ``jax``, the page's numbers bit for bit, or ``pytorch``) beside the export
button, then one column (``#export-results``) holding the stale banner (``#export-status``),
the note saying what differs in PyTorch for the current settings (``#export-pytorch``,
``views.export_note``), the script (``#export-script``) and its file (``#export-file``).
``wire`` joins the button to the ``export`` endpoint with every input in ``EXPORT``'s order
(the step's controls, the training tab's run settings, the framework), and refreshes the note
from the same inputs on each export and each framework change, in a private event of its own
(it runs the step and its autocast estimate, ``core.export.autocast``, for the measured line),
so the endpoint's outputs stay the script and its file.

Stale: the note and the script each keep the settings they were made with (``made_with``: the
note's start as the defaults it is built with; the script's after a successful export). When
a control commits, new step results show, or either is made again, both are compared with the
controls (each value as the settings table reads it, the upload by its name); a difference
shows the banner naming, for each, the settings it was made with and what the controls say
now, and the page dims the column under it (``ui.assets``), as it does the training results.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.export.autocast import autocast_new_loss
from playground.core.recipes.registry import recipe
from playground.core.settings.settings import ConfigError, StepConfig, check_setting, settings
from playground.core.step.report import run_report
from playground.ui.components import Page, StaleCheck
from playground.ui.endpoints import EXPORT, EXPORT_RUN_FIELDS, ExportOutputs, run_export
from playground.ui.fair_use import LANE_SLOTS
from playground.ui.uploads import upload_key, user_data
from playground.ui.widgets import DEFAULTS, commit_triggers, session_state
from playground.views.export import FRAMEWORKS
from playground.views.export_note import pytorch_note
from playground.views.labels import labelled


@dataclass
class ExportPanel:
    """The export's components, by the names of the outputs they show."""

    button: gr.Button
    framework: gr.Radio
    status: gr.Markdown
    note: gr.Markdown
    script: gr.Code
    script_file: gr.File
    note_made_with: gr.State  # made_with of the note's settings
    script_made_with: gr.State  # made_with of the script's settings, None before an export


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
        button = gr.Button(EXPORT_WORDS, variant="primary")
    # Everything an export shows sits in one column: a stale banner in it dims the rest.
    with gr.Column(elem_id="export-results"):
        status = gr.Markdown(visible=False, elem_id="export-status")
        note = gr.Markdown(pytorch_note(StepConfig()), elem_id="export-pytorch")
        script = gr.Code(language="python", label="script", elem_id="export-script")
        script_file = gr.File(label="script (.py)", elem_id="export-file")
    defaults = made_with({name: DEFAULTS.get(name) for name in EXPORT.order} | _FRAMEWORK)
    return ExportPanel(
        button,
        framework,
        status,
        note,
        script,
        script_file,
        session_state(defaults),
        session_state(None),
    )


EXPORT_WORDS = "Export this step and training run as a script"
_FRAMEWORK = {"framework": FRAMEWORKS[0], "data": None}


def made_with(values: dict[str, Any]) -> dict[str, Any]:
    """The export inputs as a result records them: each setting as the settings table reads it
    (as sent when the table refuses it), the framework, and the upload's file name (or None)."""
    table = settings()
    recorded: dict[str, Any] = {}
    for name in EXPORT.order:
        if name == "data":
            upload = upload_key(values.get("data"))
            recorded[name] = upload[1] if upload else None
        elif name in table:
            try:
                recorded[name] = check_setting(name, values.get(name), table[name])
            except ConfigError:
                recorded[name] = values.get(name)
        else:
            recorded[name] = values.get(name)
    return recorded


def _shown(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def stale_banner(
    note: dict[str, Any] | None, script: dict[str, Any] | None, now: dict[str, Any]
) -> str:
    """The banner over a stale note or script (HTML; see the rule), or "" when both match."""
    parts, changed = [], {}
    for what, held in (("the PyTorch note", note), ("the script", script)):
        differing = [name for name in (held or {}) if held[name] != now.get(name)]
        if differing:
            held_text = labelled(held, differing, _shown)
            parts.append(f"{what} below was made with {held_text}")
            changed |= dict.fromkeys(differing)
    if not parts:
        return ""
    controls = labelled(now, changed, _shown)
    return (
        f"<div class='stale-banner' role='status'><strong>Not updated</strong>: "
        f"{'; '.join(parts)}. The controls now say {controls}. Press "
        f"<strong>{EXPORT_WORDS}</strong> to make both for the controls' settings.</div>"
    )


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


def _note_and_settings(*args: Any) -> tuple[Any, Any]:
    """The note (``_note``) and the settings it was made with; both skipped while a setting or
    the upload is invalid."""
    note = _note(*args)
    if not isinstance(note, str):
        return note, note
    return note, made_with(EXPORT.values(args))


def _inputs(page: Page, panel: ExportPanel) -> tuple[list[Any], dict[str, Any]]:
    """The ``export`` endpoint's inputs in its order, and the controls that are not the step's
    (the training run's, the framework)."""
    own = {
        name: component
        for record in page.sections.values()
        for name, component in getattr(record, "controls", {}).items()
    } | {"framework": panel.framework}
    every = page.controls | own
    return [every[name] for name in EXPORT.order], own


def check_note_and_script(*args: Any) -> Any:
    """The banner over the note and the script (the last two inputs: the settings each was
    made with) for the controls (the others)."""
    now = made_with(EXPORT.values(args[:-2]))
    banner = stale_banner(*args[-2:], now)
    return gr.update(value=banner, visible=bool(banner))


def checks(page: Page, panel: ExportPanel) -> list[StaleCheck]:
    """The note's and the script's stale check, which every commit of the step's controls runs
    (an example, a preset and the URL commit them too)."""
    inputs, _ = _inputs(page, panel)
    stamps = (panel.note_made_with, panel.script_made_with)
    return [StaleCheck(check_note_and_script, (*inputs, *stamps), (panel.status,))]


def wire(page: Page, panel: ExportPanel) -> None:
    """The ``export`` endpoint and the note's refresh (see the rule)."""
    inputs, own = _inputs(page, panel)
    every = page.controls | own
    export_event = panel.button.click(
        run_export,
        inputs=inputs,
        outputs=[getattr(panel, name) for name in ExportOutputs._fields],
        api_name="export",
        preprocess=False,
        concurrency_limit=LANE_SLOTS,
    )
    private = {"api_visibility": "private", "preprocess": False}
    for trigger in (panel.button.click, panel.framework.change):
        trigger(
            _note_and_settings,
            inputs=inputs,
            outputs=[panel.note, panel.note_made_with],
            concurrency_limit=LANE_SLOTS,
            **private,
        )
    export_event.success(
        lambda *args: made_with(EXPORT.values(args)),
        inputs=inputs,
        outputs=panel.script_made_with,
        queue=False,
        **private,
    )

    # A new note or script, or a commit of a control that is not the step's, checks both
    # against the controls (a commit of the step's controls runs the same check: ``checks``).
    triggers = [
        panel.note_made_with.change,
        panel.script_made_with.change,
        *(trigger for component in own.values() for trigger in commit_triggers(component)),
    ]
    (check,) = checks(page, panel)
    gr.on(
        triggers,
        check.fn,
        list(check.inputs),
        list(check.outputs),
        trigger_mode="always_last",
        queue=False,
        show_progress="hidden",
        **private,
    )
    assert set(EXPORT_RUN_FIELDS) <= set(every), "the training tab holds the run's settings"
