"""The Compare section's memory of a real transformer: its fields, a config.json, its chart.

Rule: the architecture's inputs (ARCHITECTURE_INPUTS, appended to /compare's: ``config_json``,
then the architecture's fields and the training setup's, each with its default) make one
``ArchitectureMemory`` (``core.compare.architecture_ledger``): a non-empty ``config_json`` (a
Hugging Face config.json's text) sets the architecture, else its fields do; the optimizer, its
state's dtype and per-tensor FP8's scaling are the step's settings of those names. A bad value is
a gr.Error naming the field and what it allows.

On the page, a pasted or uploaded config.json fills the fields (the page sends /compare an empty
``config_json``: the fields it shows are what it counts), and the ledger's table and stacked
bars are redrawn by the section's button, by the comparison's, and after a config.json is read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.bounds import ConfigError
from playground.core.compare.architecture import (
    CONFIG_JSON,
    DEFAULT,
    FIELDS,
    FLAGS,
    MAX_CONFIG_CHARS,
    Architecture,
    architecture,
    parse_config_json,
)
from playground.core.compare.architecture_ledger import (
    SETUP_FIELDS,
    SETUP_FLAGS,
    SETUP_SETTINGS,
    ArchitectureMemory,
    TrainingSetup,
    architecture_memory,
)
from playground.sections.compare import memory as memory_section
from playground.ui.arguments import Arguments, core_errors
from playground.ui.uploads import uploaded_file
from playground.ui.widgets import as_plot

MODEL_FIELDS = (*FIELDS, *FLAGS)
SETUP_INPUTS = (*SETUP_FIELDS, *SETUP_FLAGS)
_SETUP = TrainingSetup()
# /compare's appended architecture inputs, (name, default), in the API's order.
ARCHITECTURE_INPUTS: tuple[tuple[str, Any], ...] = (
    (CONFIG_JSON, ""),
    *((name, DEFAULT[name]) for name in MODEL_FIELDS),
    *((name, getattr(_SETUP, name)) for name in SETUP_INPUTS),
)
# The page's private redraw: the step's settings the ledger reads, then the architecture's.
MEMORY = Arguments(SETUP_SETTINGS, extras=(), appended=ARCHITECTURE_INPUTS)
UPLOAD_FIELD = "config_file"
INTRO = """
#### Memory of a real transformer, by recipe
The ledger above counts the toy model of this step. This one counts a decoder-only transformer
of your own shape (paste or upload its Hugging Face `config.json`, Llama-like or GPT-2, or enter
the numbers) trained on one GPU as NVIDIA TransformerEngine stores it: the working weights
(bfloat16 beside an FP8 recipe's quantized copies and their transposes), their scales and
amax histories (a constant per GEMM), gradients, float32 masters, the optimizer's state (the
step's optimizer and moments dtype), and one micro-batch's activations, counted term by term
as Korthikanti et al. (2022) do.
"""


def memory_of(values: dict[str, Any]) -> ArchitectureMemory:
    """The ledgers of the module rule; ConfigError naming a bad field."""
    text = values.get(CONFIG_JSON)
    if text not in (None, ""):
        model = parse_config_json(text)
    else:
        model = architecture({name: values[name] for name in MODEL_FIELDS})
    setup = TrainingSetup(**{name: values[name] for name in (*SETUP_SETTINGS, *SETUP_INPUTS)})
    return architecture_memory(model, setup)


@MEMORY.handler
def memory_event(values: dict[str, Any]) -> tuple[str, Any]:
    """The page's redraw: (the table, the stacked bars)."""
    with core_errors():
        memory = memory_of(values)
    return (
        memory_section.architecture_table(memory),
        as_plot(memory_section.architecture_figure(memory)),
    )


def _fields(model: Architecture) -> tuple[Any, ...]:
    return tuple(getattr(model, name) for name in MODEL_FIELDS)


def read_pasted(text: Any) -> tuple[Any, ...]:
    """A pasted config.json: the fields it sets (gr.Error naming a bad key)."""
    if text in (None, ""):
        return tuple(gr.skip() for _ in MODEL_FIELDS)
    with core_errors():
        return _fields(parse_config_json(text))


def read_upload(file: Any) -> tuple[Any, ...]:
    """An uploaded config.json, read once and deleted: its text, then the fields it sets."""
    with core_errors():
        located = uploaded_file(file, UPLOAD_FIELD)
        if located is None:
            raise ConfigError(UPLOAD_FIELD, f"{UPLOAD_FIELD}: upload a config.json file")
        path, _ = located
        try:
            with open(path, "rb") as opened:
                raw = opened.read(MAX_CONFIG_CHARS + 1)
        finally:
            path.unlink(missing_ok=True)  # read or refused: nothing of the client's stays
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigError(UPLOAD_FIELD, f"{UPLOAD_FIELD} must be UTF-8 text") from None
        return (text, *_fields(parse_config_json(text)))


@dataclass
class ArchitecturePanel:
    """The panel's components by input name, its button and outputs."""

    inputs: dict[str, gr.components.Component]
    pasted: gr.Textbox
    upload: gr.File
    run: gr.Button
    architecture_memory: gr.Markdown
    architecture_plot: gr.Plot


def _number(name: str, bounds: Any, default: Any) -> gr.Number:
    return gr.Number(
        default,
        label=bounds.label,
        info=f"{bounds.help} Allowed: {bounds.describe()}.",
        precision=0,
        minimum=bounds.low,
        maximum=bounds.high,
        elem_id=name,
    )


def _flag(name: str, label: str, help_text: str, default: bool) -> gr.Checkbox:
    return gr.Checkbox(default, label=label, info=help_text, elem_id=name)


def build() -> ArchitecturePanel:
    """The panel (call inside the Compare section's accordion)."""
    gr.Markdown(INTRO, elem_id="architecture-intro")
    defaults = dict(ARCHITECTURE_INPUTS)
    inputs: dict[str, gr.components.Component] = {}
    with gr.Row(equal_height=False):
        pasted = gr.Textbox(
            label="config.json (paste)",
            info="Its fields fill the boxes below when you leave the box.",
            lines=4,
            max_lines=12,
            elem_id="config-json-paste",
        )
        upload = gr.File(
            label="config.json (upload)", file_types=[".json"], elem_id="config-json-file"
        )
    with gr.Row(equal_height=False):
        family = FIELDS["family"]
        inputs["family"] = gr.Radio(
            list(family.choices),
            value=defaults["family"],
            label=family.label,
            info=family.help,
            elem_id="family",
        )
        for name in list(FIELDS)[1:5]:
            inputs[name] = _number(name, FIELDS[name], defaults[name])
    with gr.Row(equal_height=False):
        for name in list(FIELDS)[5:]:
            inputs[name] = _number(name, FIELDS[name], defaults[name])
    with gr.Row(equal_height=False):
        for name, (label, help_text) in FLAGS.items():
            inputs[name] = _flag(name, label, help_text, defaults[name])
    with gr.Row(equal_height=False):
        for name, bounds in SETUP_FIELDS.items():
            inputs[name] = _number(name, bounds, defaults[name])
        for name, (label, help_text) in SETUP_FLAGS.items():
            inputs[name] = _flag(name, label, help_text, defaults[name])
        run = gr.Button("Count memory", elem_id="memory-run")
    # /compare's config_json: the page counts the fields it shows, so it sends none.
    inputs[CONFIG_JSON] = gr.Textbox("", visible=False, elem_id=CONFIG_JSON)
    table = gr.Markdown(elem_id="architecture-memory")
    plot = gr.Plot(label="memory by recipe", show_label=False, elem_id="architecture-plot")
    return ArchitecturePanel(inputs, pasted, upload, run, table, plot)


def wire(controls: dict[str, Any], panel: ArchitecturePanel, compare_run: gr.Button) -> None:
    """The redraw (on the panel's button and the comparison's), and the config.json readers,
    each followed by a redraw when it read a file. ``controls``: the page's settings."""
    every = controls | panel.inputs
    redraw = {
        "fn": memory_event,
        "inputs": [every[name] for name in MEMORY.order],
        "outputs": [panel.architecture_memory, panel.architecture_plot],
        "api_visibility": "private",
        "preprocess": False,
        "show_progress_on": [panel.architecture_memory],
    }
    gr.on([panel.run.click, compare_run.click], api_name="architecture_memory", **redraw)
    fields = [panel.inputs[name] for name in MODEL_FIELDS]
    private = {"api_visibility": "private", "preprocess": False}
    panel.pasted.blur(
        read_pasted, inputs=panel.pasted, outputs=fields, api_name="read_config", **private
    ).success(**redraw)
    panel.upload.upload(
        read_upload,
        inputs=panel.upload,
        outputs=[panel.pasted, *fields],
        api_name="upload_config",
        **private,
    ).success(**redraw)
