"""Code export: the page's step and training run as a standalone script, in JAX or PyTorch.

Rule: ``export_script(config, data, framework)`` is a template of ``core.export`` with the
page's settings written in; ``framework`` is ``jax`` (``core/export/jax_script.py``, rendered here)
or ``pytorch`` (``core/export/torch_script.py``, rendered by ``views.export_torch``). Each
template is a standalone program that runs and is ruff-checked as it is, read here as text,
never imported. The JAX script (jax, flax, optax, numpy and the standard library only)::

    rebuilds make_batch()                  same numpy PCG64 draws and float32 arithmetic order,
                                           or the uploaded batch, embedded (``DATA``)
    runs mixed_precision_step, float32_step    the page's step and its float32 twin
    runs train()                           the training run: float32, mixed and pure runs
    prints one JSON line (its last)        mixed_new, float32_new, final_loss, skipped_steps,
                                           config, versions

Rendering rewrites two places of the template: the settings block (the lines between
``# --- settings`` and ``# --- end of settings ---``: one constant per EXPORTED_FIELDS, with
its label, then core's NOISE_STD, the upload and the compiler options of the page's step) and
the docstring's ``    python <file>.py`` line.

Bit for bit, as the page: the script compiles the step as ``run_report`` does (the page's
compiler options; the starting parameters drawn by a compiled call of their own and passed in)
and the training run as ``run_dynamics`` does (one program, parameters drawn inside). It must
compile, because XLA on CPU rounds a compiled program differently from eager execution
(low-precision intermediates kept in float32 inside a fusion; a multiply and an add contracted
into an FMA). The one known gap: when N or D_in is 1, a matmul becomes elementwise products
whose FMA contraction depends on what else the program returns, and a step's loss can differ
by a few units in the last place.

The PyTorch script (``views.export_torch``) writes TORCH_FIELDS: EXPORTED_FIELDS, then the
per-operation policy, the task, the outliers and float8's scaling; it draws its batch and
starting parameters again from the seeds, as the JAX script does.

Refused, with a ConfigError naming the field (``check_exportable``, then the upload's size)::

    compute_dtype   a recipe the script does not compute in (``script_dtypes``): for JAX any
                    but a plain cast, for PyTorch a block-scaled one (per-block scales)
    precision_policy  PyTorch: one torch.autocast does not compute (TORCH_POLICIES)
    model           one the template does not build (``ModelSpec.scripts``)
    optimizer       one the template does not build (``OptimizerSpec.scripts``)
    any other       a setting the script does not reproduce, at a value other than its default
    data            an upload over the embedding cap (``views.export_text.check_embedded``)

Another model's options (written at their defaults) and another recipe's settings
(``Recipe.settings``) change nothing, so they are never refused.
"""

from __future__ import annotations

import json
import re

from playground.core.data.user_data import UserData, fitted
from playground.core.model.models import MODELS, ModelChoice
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.recipes.registry import RECIPES, recipe
from playground.core.settings.settings import ConfigError, StepConfig, defaults, settings
from playground.core.step.report import COMPILER_OPTIONS
from playground.views import export_torch
from playground.views.export_text import (
    check_embedded,
    rewrite,
    settings_lines,
    template,
)

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
    "model",
    "hidden_layers",
    "hidden_width",
    "activation",
    "optimizer",
    "steps",
    "mode",
    "period",
    "pure_rounding",
    "norm",
    "seq_len",
    "heads",
)
# The PyTorch script reproduces these too: the per-operation policy (as torch.autocast rounds),
# the task, the outliers and the per-tensor float8 recipe's scaling, in this order after them.
TORCH_FIELDS = (
    *EXPORTED_FIELDS,
    "precision_policy",
    "task",
    "outlier_share",
    "outlier_scale",
    "fp8_scaling",
    "amax_history",
)
# The precision policies torch.autocast computes: its own, and the exercise's, which casts more
# (the data, weights and loss) and so agrees within the dtype's precision.
TORCH_POLICIES = ("exercise", "autocast")
FRAMEWORKS = ("jax", "pytorch")
# Compute dtypes the scripts handle: recipes that are a plain cast to their own dtype.
SCRIPT_DTYPES = tuple(name for name, entry in RECIPES.items() if entry.plain_dtype == name)
TEMPLATE = "jax_script.py"  # in playground.core.export
_SETTINGS_BLOCK = re.compile(
    r"^(# --- settings\b.*\n)(?:.*\n)*?(# --- end of settings ---\n)", re.M
)
_RUN_COMMAND = re.compile(r"^(    python )\S+\.py\n", re.M)


def export_filename(config: StepConfig, framework: str = "jax") -> str:
    """The script's file name, e.g. ``mixed_precision_step_bfloat16_seed0.py`` (JAX) or
    ``mixed_precision_torch_bfloat16_seed0.py`` (PyTorch)."""
    kind = "torch" if framework == "pytorch" else "step"
    return f"mixed_precision_{kind}_{config.compute_dtype}_seed{config.model_seed}.py"


def export_script(config: StepConfig, data: UserData | None = None, framework: str = "jax") -> str:
    """The standalone script reproducing the page's step and training run for ``config``.

    Args:
      config: a validated StepConfig.
      data: the user's upload, embedded in the script (N and D_in follow it), or None.
      framework: ``jax`` (equal to the page bit for bit) or ``pytorch`` (torch.autocast, or
        float8's scaled casts; equal within the compute dtype's precision).

    Returns:
      The script's source text (ends with a newline; lines of at most 88 characters).

    Raises:
      ConfigError: a setting the script does not reproduce differs from its default, the
        compute dtype is not one of ``script_dtypes(framework)``, or the upload is over the
        cap.
    """
    if framework not in FRAMEWORKS:
        raise ConfigError(
            "framework", f"framework must be one of {', '.join(FRAMEWORKS)}; got {framework!r}"
        )
    check_exportable(config, framework)
    config, batch = fitted(config, data)
    if framework == "pytorch":
        filename = export_filename(config, framework)
        values = exported_values(config, TORCH_FIELDS)
        return export_torch.render(config, batch, values, filename)
    if batch is not None:
        check_embedded({"data": sum(array.size for array in batch)}, "JAX")
    text = template(TEMPLATE)
    values = exported_values(config)
    block = _constants(values, batch)
    text = rewrite(text, _SETTINGS_BLOCK, "settings block", lambda m: m[1] + block + m[2], TEMPLATE)
    command = f"{export_filename(config)}\n"
    return rewrite(text, _RUN_COMMAND, "run command", lambda m: m[1] + command, TEMPLATE)


def exported_fields(framework: str = "jax") -> tuple[str, ...]:
    """The settings ``framework``'s script writes as constants: EXPORTED_FIELDS, or for PyTorch
    TORCH_FIELDS."""
    return TORCH_FIELDS if framework == "pytorch" else EXPORTED_FIELDS


def script_dtypes(framework: str = "jax") -> tuple[str, ...]:
    """The compute dtypes ``framework``'s script computes in: the plain casts (SCRIPT_DTYPES);
    for PyTorch also a recipe of per-tensor scalings (float8: scaled casts around each
    nn.Linear's matmul)."""
    pytorch = framework == "pytorch"
    return tuple(
        name
        for name, entry in RECIPES.items()
        if entry.plain_dtype == name or (pytorch and entry.scalings)
    )


def check_exportable(config: StepConfig, framework: str = "jax") -> None:
    """ConfigError naming the first setting the script would not reproduce (see the rule)."""
    dtypes = script_dtypes(framework)
    if config.compute_dtype not in dtypes:
        where = (
            "JAX's scaled float8 matmuls are not in the script"
            if framework == "jax"
            else (
                "a block-scaled recipe's per-block scales (and Hadamard rotations, stochastic "
                "rounding) are not in the script"
            )
        )
        raise ConfigError(
            "compute_dtype",
            f"compute_dtype: the exported {framework} script computes in "
            f"{', '.join(dtypes)} ({where}); got {config.compute_dtype!r}",
        )
    if framework == "pytorch" and config.precision_policy not in TORCH_POLICIES:
        raise ConfigError(
            "precision_policy",
            f"precision_policy: the exported pytorch script rounds as torch.autocast does "
            f"({', '.join(TORCH_POLICIES)}), which computes activations in the compute dtype; "
            f"got {config.precision_policy!r}",
        )
    for field, registry in (("model", MODELS), ("optimizer", OPTIMIZERS)):
        exported = built_by(registry, framework)
        if getattr(config, field) not in exported:
            raise ConfigError(
                field,
                f"{field}: the exported {framework} script builds the {field}s "
                f"{', '.join(exported)}; got {getattr(config, field)!r}",
            )
    table, default = settings(), defaults()
    # The settings of the other recipes and the options of the other models change nothing in
    # the run.
    ignored = {
        setting
        for name, entry in RECIPES.items()
        if name != config.compute_dtype
        for setting in entry.settings
    } - set(recipe(config.compute_dtype).settings)
    ignored.update(
        option for name, spec in MODELS.items() if name != config.model for option in spec.options
    )
    for name, bounds in table.items():
        if name in exported_fields(framework) or name in ignored:
            continue
        if getattr(config, name) != default[name]:
            raise ConfigError(
                name,
                f"{name} ({bounds.label}) must be {default[name]!r} to export the run; the "
                f"exported script does not reproduce other values; got {getattr(config, name)!r}",
            )


def built_by(registry: dict, framework: str) -> tuple[str, ...]:
    """The entries of ``registry`` (models, optimizers) whose ``scripts`` say ``framework``'s
    template builds them."""
    return tuple(name for name, spec in registry.items() if framework in spec.scripts)


def exported_values(
    config: StepConfig, fields: tuple[str, ...] = EXPORTED_FIELDS
) -> dict[str, int | float | str]:
    """The ``fields`` of ``config``; another model's options at their defaults."""
    choice = config.model_choice  # normalized: unused options at their defaults
    model = {field: getattr(choice, field) for field in ModelChoice.__dataclass_fields__}
    model["model"] = model.pop("name")
    return {name: model.get(name, getattr(config, name)) for name in fields}


def _constants(values: dict[str, int | float | str], batch) -> str:
    """The settings block's lines: the settings, the noise, the upload, the compiler options."""
    lines = [
        *settings_lines(values, batch),
        "# The XLA options of the page's step: they decide some roundings.",
        "COMPILER_OPTIONS = {",
        *(f"    {json.dumps(name)}: {value!r}," for name, value in COMPILER_OPTIONS.items()),
        "}",
    ]
    return "\n".join(lines) + "\n"
