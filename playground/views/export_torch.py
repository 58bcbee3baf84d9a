"""The PyTorch export: the page's run as a PyTorch user writes it, with the page's settings in.

Rule: ``render(config, batch, values, filename)`` is the template ``core/export/torch_script.py``
with two places rewritten (each must occur once): the settings block (one constant per exported
field with its label, then core's NOISE_STD and the upload, embedded as base64, or None) and the
docstring's run command. The template is a runnable script holding the export of
``TEMPLATE_CONFIG`` (the page's defaults); it imports torch, which the playground itself never
needs, and is read as text, never imported.

Nothing else is embedded: the script draws the batch again from the data seed (numpy's PCG64,
``core.data.synthetic``'s rule) and the starting parameters from the model seed (flax's
initializers and JAX's threefry PRNG, ported to numpy in the template), so its size does not
grow with N or the model. Only an upload is embedded, counted before anything is computed
(``export_text.check_embedded``: the refusal names ``data``).
"""

from __future__ import annotations

import re

import numpy as np

from playground.core.settings.settings import StepConfig
from playground.views.export_text import (
    check_embedded,
    rewrite,
    settings_lines,
    template,
)

TEMPLATE = "torch_script.py"  # in playground.core.export
# The settings the template itself holds (its docstring's table): the page's defaults.
TEMPLATE_CONFIG = StepConfig()
_SETTINGS_BLOCK = re.compile(
    r"^(# --- settings\b.*\n)(?:.*\n)*?(# --- end of settings ---\n)", re.M
)
_RUN_COMMAND = re.compile(r"^(    python )\S+\.py\n", re.M)


def render(
    config: StepConfig,
    batch: tuple[np.ndarray, np.ndarray] | None,
    values: dict[str, int | float | str],
    filename: str,
) -> str:
    """The PyTorch script of a config fitted to its data (``batch``: the upload or None), its
    exported settings ``values`` and its file name."""
    if batch is not None:
        check_embedded({"data": sum(array.size for array in batch)}, "PyTorch")
    block = _settings_block(values, batch)
    text = template(TEMPLATE)
    for place, what, replace in (
        (_SETTINGS_BLOCK, "settings block", lambda m: m[1] + block + m[2]),
        (_RUN_COMMAND, "run command", lambda m: m[1] + filename + "\n"),
    ):
        text = rewrite(text, place, what, replace, TEMPLATE)
    return text


def _settings_block(values: dict[str, int | float | str], batch) -> str:
    """The settings block's lines: the settings with their labels, the noise, the upload."""
    return "\n".join(settings_lines(values, batch)) + "\n"
