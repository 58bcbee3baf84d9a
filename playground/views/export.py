"""Code export: the page's step as a standalone script that anyone can run without the playground.

Rule: ``export_script(config)`` is the template ``playground/core/export_script.py`` with the
page's settings written in. The template is a standalone program (jax, flax, optax, numpy and
the standard library only) that holds the page's defaults, runs and is ruff-checked as it is,
and is read here as text, never imported. It

    rebuilds make_batch(config)            same numpy PCG64 draws, same float32 arithmetic order
    runs mixed_precision_step(...)         the exercise's step, compute dtype = config's
    runs float32_step(...)                 its float32 twin: no casts, no loss scale
    prints one JSON line (its last)        {"mixed_new", "float32_new", "config", "versions"}

Rendering rewrites three places of the template, each of which must occur exactly once (a
RuntimeError names the one that does not, should the template be edited out of shape):

    the settings block   the lines between ``# --- settings`` and ``# --- end of settings ---``:
                         one constant per EXPORTED_FIELDS, then core's NOISE_STD and the
                         compiler options of the page's step
    the settings table   the docstring's indented lines after "Settings (the constants below):"
    the run command      the docstring's ``    python <file>.py`` line

Compiled, as the page runs it. XLA on CPU rounds a compiled program differently from op-by-op
(eager) execution: inside a fusion it may keep a low-precision intermediate in float32, and it
contracts a multiply followed by an add into one fused multiply-add (FMA). Run eagerly, the
script's functions differ from the page in a few last bits now and then (8 of 48 losses in one
check), so the script jits each step the way ``run_report`` jits its step: the batch, lr and
loss scale as traced np.float32 arguments, the page's compiler options, and the starting
parameters as an argument, drawn by a compiled call of their own from
``jax.random.key(np.uint32(seed))`` (the key ``nnx.Rngs(seed)`` makes), as ``run_report`` draws
them with ``models.initial_state``. A program that draws the weights itself may lay them out
differently in memory, and its float32 matmul then rounds differently (the float32 twin's loss
moved by one unit in the last place at 256 x 64 x 16 when the page began to pass them in).

Equality with the page, and its one known gap: on the same machine and library versions the
script prints ``run_report(config)``'s ``mixed_new_loss`` and ``float32_new_loss`` bit for bit.
Checked on 736 configs (both dtypes, seeds up to 2^32 - 1, lr 0 to 1.7, loss scales 2^-126 to
2^126, data scales 2^-12 to 2^10, shapes 1 x 1 x 1 to 128 x 100 x 7): all 1,472 losses equal
but 20 float32-twin losses, all at shapes with N = 1 or D_in = 1, each off by 1 to 5 units in
the last place. At those shapes XLA turns a matmul into elementwise products, and whether a
product is fused into an FMA with the addition after it depends on what else the compiled
program returns. The page's program also returns the parameters, gradients and updates for its
charts, packed into two arrays; even the page's own step code, compiled to return only the
losses, differs from the page there. Matching those last bits would mean copying the page's
output packing into the script, which would then be about the page rather than the exercise.
Checked again after the parameters became an argument and the compiler options changed, on 60
random configs of the same kinds (N = 1 and D_in = 1 among them): all 120 losses were equal.

Non-finite losses are written as the strings "nan", "inf" and "-inf" (``views.numbers``'s rule),
so the JSON line is strict. The script reproduces the exercise only: the default model (the
linear layer), SGD, the synthetic batch and a recipe that is a plain cast to the dtype it is
named after (``plain_dtype`` in the recipe registry). A config with another model, optimizer
or recipe is refused with a ConfigError rather than exported as a script whose numbers would
differ from the page's; the options of other models, the settings of other recipes and the
training-run settings (group "dynamics") do not change this step and are ignored.
"""

from __future__ import annotations

import functools
import importlib.resources
import json
import math
import re
from collections.abc import Callable

from playground.core.data import NOISE_STD
from playground.core.models import MODELS
from playground.core.policy import RECIPES, recipe
from playground.core.report import COMPILER_OPTIONS
from playground.core.settings import ConfigError, StepConfig, defaults, settings

# The settings the script reproduces, in the order they are written as constants.
EXPORTED_FIELDS = (
    "model_seed",
    "data_seed",
    "n",
    "d_in",
    "d_out",
    "lr",
    "loss_scale",
    "input_scale",
    "target_scale",
    "compute_dtype",
)
# Compute dtypes the script's step handles: recipes that are a plain cast to their own dtype.
SCRIPT_DTYPES = tuple(name for name, entry in RECIPES.items() if entry.plain_dtype == name)
TEMPLATE = "export_script.py"  # in playground.core
_SETTINGS_BLOCK = re.compile(
    r"^(# --- settings\b.*\n)(?:.*\n)*?(# --- end of settings ---\n)", re.M
)
_SETTINGS_TABLE = re.compile(r"^(Settings \(the constants below\):\n\n)(?:    .*\n)+", re.M)
_RUN_COMMAND = re.compile(r"^(    python )\S+\.py\n", re.M)


def export_filename(config: StepConfig) -> str:
    """A file name for the exported script, e.g. ``mixed_precision_step_bfloat16_seed0.py``."""
    return f"mixed_precision_step_{config.compute_dtype}_seed{config.model_seed}.py"


def export_script(config: StepConfig) -> str:
    """The standalone script reproducing ``run_report(config)``'s two new losses.

    Args:
      config: a validated StepConfig.

    Returns:
      The script's source text (ends with a newline; lines of at most 88 characters).

    Raises:
      ConfigError: a setting the script does not reproduce differs from its default, or the
        compute dtype is not one of SCRIPT_DTYPES.
    """
    _check_exportable(config)
    text = _template()
    block, table = _constants(config), _table(config)
    text = _rewrite(text, _SETTINGS_BLOCK, "settings block", lambda m: m[1] + block + m[2])
    text = _rewrite(text, _SETTINGS_TABLE, "settings table", lambda m: m[1] + table)
    command = f"{export_filename(config)}\n"
    return _rewrite(text, _RUN_COMMAND, "run command", lambda m: m[1] + command)


def _check_exportable(config: StepConfig) -> None:
    if recipe(config.compute_dtype).plain_dtype != config.compute_dtype:
        raise ConfigError(
            "compute_dtype",
            "the exported script reproduces the exercise's step, which computes in "
            f"{' or '.join(SCRIPT_DTYPES)}; got {config.compute_dtype!r}",
        )
    table, default = settings(), defaults()
    # The training run's settings, the options of the other models and the settings of the
    # other recipes (grouped under a recipe's name) change nothing in this step.
    other_recipes = RECIPES.keys() - {config.compute_dtype}
    ignored = {
        name for name, bounds in table.items() if bounds.group in {"dynamics", *other_recipes}
    }
    ignored.update(
        option for name, spec in MODELS.items() if name != config.model for option in spec.options
    )
    for name, bounds in table.items():
        if name in EXPORTED_FIELDS or name in ignored:
            continue
        if getattr(config, name) != default[name]:
            raise ConfigError(
                name,
                "the exported script reproduces the exercise's step only (nnx.Linear, "
                f"optax.sgd); {name} ({bounds.label}) must be {default[name]!r} to export it, "
                f"got {getattr(config, name)!r}",
            )


@functools.cache
def _template() -> str:
    """The template's text, read as a file of the package (it is never imported)."""
    return importlib.resources.files("playground.core").joinpath(TEMPLATE).read_text("utf-8")


def _rewrite(
    text: str, place: re.Pattern[str], what: str, replace: Callable[[re.Match[str]], str]
) -> str:
    """``text`` with the one match of ``place`` replaced by ``replace(match)``."""
    new, count = place.subn(replace, text)
    if count != 1:
        raise RuntimeError(f"the export template {TEMPLATE} needs one {what}; it has {count}")
    return new


def _literal(value: int | float | str) -> str:
    """``value`` as Python source that evaluates to exactly the same value."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    mantissa, exponent = math.frexp(value)
    if mantissa == 0.5 and abs(exponent - 1) >= 10:  # a far power of two reads better as 2.0**k
        return f"2.0**{exponent - 1}"
    return repr(float(value)).replace("e+", "e")  # 1e+38 -> 1e38, as ruff format writes it


def _table(config: StepConfig) -> str:
    """The docstring's settings table: field, value and label, in aligned columns."""
    table = settings()
    values = {name: _literal(getattr(config, name)) for name in EXPORTED_FIELDS}
    name_width = max(map(len, values))
    value_width = max(map(len, values.values()))
    rows = [
        f"    {name:<{name_width}}  {value:<{value_width}}  {table[name].label}"
        for name, value in values.items()
    ]
    return "\n".join(rows) + "\n"


def _constants(config: StepConfig) -> str:
    """The settings block's lines: the page's settings, the noise and the compiler options."""
    table = settings()
    lines = [
        f"{name.upper()} = {_literal(getattr(config, name))}  # {table[name].label}"
        for name in EXPORTED_FIELDS
    ]
    lines += [
        "",
        "# Standard deviation of the noise added to the teacher's targets.",
        f"NOISE_STD = {_literal(NOISE_STD)}",
        "# The XLA options the playground compiles its step with; they are part of what",
        "# decides how low-precision intermediate results are rounded.",
        "COMPILER_OPTIONS = {",
        *(f"    {json.dumps(name)}: {value!r}," for name, value in COMPILER_OPTIONS.items()),
        "}",
    ]
    return "\n".join(lines) + "\n"
