"""The PyTorch export: the page's run as a PyTorch user writes it, with the page's numbers in.

Rule: ``render(config, batch, values, filename)`` is the template
``core/export/torch_script.py`` with three places rewritten (each must occur once): the
settings block (one constant per exported field), the data block (the starting parameters and
the batch, embedded) and the docstring's run command. The template is a runnable script
holding the export of ``TEMPLATE_CONFIG`` (a small shape, so it stays short); it imports
torch, which the playground itself never needs, and is read as text, never imported.

The starting parameters are ``models.initial_state``'s (JAX's draws from the model seed), under
the page's own paths (the template's modules carry the page's names: ``layers.0``, ``norms.1``,
``attention.query``, ...), each kernel written transposed as ``nn.Linear``'s weight and each
layer norm's scale as ``nn.LayerNorm``'s weight. The
batch is ``make_batch(config)``'s, or the upload. Everything embedded is counted before
anything is computed (``export_text.check_embedded``: the refusal names ``data``, ``n``, or the
field that sets the parameter count).
"""

from __future__ import annotations

import math
import re

import numpy as np

from playground.core.data.synthetic import make_batch
from playground.core.model.models import MODELS, initial_state, param_arrays, param_shapes
from playground.core.settings.settings import StepConfig, settings
from playground.views.export_text import (
    check_embedded,
    embedded,
    literal,
    rewrite,
    template,
)

TEMPLATE = "torch_script.py"  # in playground.core.export
# The settings the template itself holds (its docstring's table): a small linear run.
TEMPLATE_CONFIG = StepConfig(n=8, d_in=4, d_out=2, steps=20)
_SETTINGS_BLOCK = re.compile(
    r"^(# --- settings\b.*\n)(?:.*\n)*?(# --- end of settings ---\n)", re.M
)
_DATA_BLOCK = re.compile(r"^(# --- data\b.*\n)(?:.*\n)*?(# --- end of data ---\n)", re.M)
_RUN_COMMAND = re.compile(r"^(    python )\S+\.py\n", re.M)


def render(
    config: StepConfig,
    batch: tuple[np.ndarray, np.ndarray] | None,
    values: dict[str, int | float | str],
    filename: str,
) -> str:
    """The PyTorch script of a config fitted to its data (``batch``: the upload or None), its
    exported settings ``values`` and its file name."""
    choice = config.model_choice
    shapes = param_shapes(choice, config.d_in, config.d_out)
    # The parameter count grows with the hidden width when the model has one, else with D_in.
    size_field = "hidden_width" if "hidden_width" in MODELS[config.model].options else "d_in"
    check_embedded(
        {
            "data" if batch is not None else "n": config.n * (config.d_in + config.d_out),
            size_field: sum(math.prod(shape) for shape in shapes.values()),
        },
        "PyTorch",
    )
    x, y = batch if batch is not None else make_batch(config)
    seed = np.uint32(config.model_seed)
    start = param_arrays(initial_state(seed, choice=choice, d_in=config.d_in, d_out=config.d_out))
    text = template(TEMPLATE)
    block = "".join(
        f"{name.upper()} = {literal(value)}  # {settings()[name].label}\n"
        for name, value in values.items()
    )
    data = _data_block(start, x, y)
    for place, what, replace in (
        (_SETTINGS_BLOCK, "settings block", lambda m: m[1] + block + m[2]),
        (_DATA_BLOCK, "data block", lambda m: m[1] + data + m[2]),
        (_RUN_COMMAND, "run command", lambda m: m[1] + filename + "\n"),
    ):
        text = rewrite(text, place, what, replace, TEMPLATE)
    return text


def torch_names(start: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The starting parameters under the template's names, kernels as weights (see the rule):
    {path: array} in ``param_arrays`` order. A path keeps its modules; its leaf ``kernel``
    becomes ``weight``, transposed ((in, out) -> nn.Linear's (out, in)), a layer norm's
    ``scale`` becomes ``weight``, and ``bias`` stays."""
    named = {}
    for path, array in start.items():
        module, _, leaf = path.rpartition(".")
        value = np.asarray(array).T if leaf == "kernel" else np.asarray(array)
        name = "weight" if leaf in ("kernel", "scale") else leaf
        named[f"{module}.{name}" if module else name] = value
    return named


def _data_block(start, x: np.ndarray, y: np.ndarray) -> str:
    """The data block's lines: WEIGHTS (the starting parameters by torch name), X and Y."""
    entries = [f'    "{name}": {embedded(a)},' for name, a in torch_names(start).items()]
    lines = ["WEIGHTS = {", *entries, "}", f"X = {embedded(x, 4)}", f"Y = {embedded(y, 4)}"]
    return "\n".join(lines) + "\n"
