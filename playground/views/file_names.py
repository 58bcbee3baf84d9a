"""Download file names: what a file holds and the settings it was made with.

Rule: a name is ``{what}_{settings}.{ext}``, such as
``gradients_bfloat16_linear_sgd_n256_64x16_lr0.1_S1024_seed0_data0.csv``, built only from
letters, digits, ``.``, ``_`` and ``-`` (anything else becomes ``-``), so it is safe as a path
on every system and in a URL.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from playground.core.model.models import DEFAULT_MODEL, MODELS, ModelChoice
from playground.core.model.optimizers import DEFAULT_OPTIMIZER


def name_part(text: str) -> str:
    """``text`` reduced to letters, digits, ``.``, ``_`` and ``-``; ValueError if none remain."""
    part = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.")
    if not part:
        raise ValueError(f"a download name needs a letter or digit; got {text!r}")
    return part


def _number(value: Any) -> str:
    """A setting in a file name: 1024, 0.1, 8.50706e37."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}".replace("+", "")


def settings_tag(config: Mapping[str, Any], *, scale: bool = True, run: bool = False) -> str:
    """The settings part of a file name, from a ``StepConfig.to_dict()``.

    ``bfloat16_linear_sgd_n256_64x16_lr0.1_S1024_seed0_data0``: compute dtype, model (its
    registry entry's slug: an MLP as ``mlp2x64-relu``), optimizer, N, D_in x D_out,
    learning rate, loss scale, model and data seeds. ``scale=False`` leaves out S (the sweep
    sets its own), ``run=True`` adds the dynamics run (``static_200steps``, ``period100``
    when dynamic, ``pure-kahan`` or ``pure-stochastic`` when the pure run does not round to
    nearest). The data scales are left out (the JSON summary holds every setting).
    Raises KeyError for a missing setting or an unknown model (model and optimizer default to
    the registries' defaults).
    """
    c = config
    name = c.get("model", DEFAULT_MODEL.name)
    spec = MODELS[name]
    model = spec.slug(ModelChoice(name, **{option: c[option] for option in spec.options}))
    parts = [c["compute_dtype"], model, c.get("optimizer", DEFAULT_OPTIMIZER)]
    parts += [f"n{c['n']}", f"{c['d_in']}x{c['d_out']}", f"lr{_number(c['lr'])}"]
    if scale:
        parts.append(f"S{_number(c['loss_scale'])}")
    if run:
        parts += [c["mode"], f"{c['steps']}steps"]
        parts += [f"period{c['period']}"] if c["mode"] == "dynamic" else []
        rounding = c.get("pure_rounding", "nearest")
        parts += [f"pure-{rounding}"] if rounding != "nearest" else []
    parts += [f"seed{c['model_seed']}", f"data{c['data_seed']}"]
    return "_".join(name_part(part) for part in parts)
