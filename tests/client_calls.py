"""Every registered choice through every endpoint: a covering design read from the registries,
what the core says of each call before it is sent, and what gradio_client takes for a file.

The design (``covering_rows``): one row per recipe x model pair; the other factors (optimizer,
precision policy, task, and the MLP's norm and activation) are given to the rows greedily, each
row taking the values that cover the most pairs of values (of any two factors) no row has yet,
so every value of every factor appears, and every pair of values of two factors every model
takes (optimizer, policy, task) is in some row. A model's own options (norm, activation) vary
only where the model takes them. Every name comes from a registry in ``playground.core``; none
is typed here, so a new recipe, model, optimizer, policy, task or norm joins the design by
itself. Of a row's candidates, those the core accepts at the most endpoints come first.

    refusal(endpoint, settings)   the core's ConfigError message for that call, or None
    file_like(outputs)            every dict in outputs that gradio_client would download
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

from gradio_client import utils as client_utils
from pydantic import BaseModel

from playground.core.bounds import ConfigError
from playground.core.model.losses import TASKS
from playground.core.model.models import ACTIVATIONS, MODELS, NORMS
from playground.core.model.op_policy import PRESETS
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.recipes.registry import RECIPES
from playground.core.runs.sweep import check_sweep_work, sweep_exponents
from playground.core.settings.cost import check_compare, check_downloads
from playground.core.settings.settings import StepConfig, defaults

# The suite's most compiled small shape, an MLP of one narrow hidden layer, a short run.
SMALL = {"n": 32, "d_in": 8, "d_out": 4}
MLP_SIZE = {"hidden_layers": 1, "hidden_width": 8}
RUN = {"steps": 3}
# The endpoints the core prices (``refusal``).
ENDPOINTS = ("step", "downloads", "sweep", "dynamics")
# The factors the design crosses, each with its registry's names.
PAIR = {"compute_dtype": tuple(RECIPES), "model": tuple(MODELS)}
OTHERS = {
    "optimizer": tuple(OPTIMIZERS),
    "precision_policy": tuple(PRESETS),
    "task": TASKS,
    "norm": NORMS,
    "activation": tuple(ACTIVATIONS),
}


def takes(model: str, factor: str) -> bool:
    """Whether ``model`` has ``factor`` to vary: the norm where it takes one, a model option
    where it is this model's, any other factor always."""
    spec = MODELS[model]
    if factor == "norm":
        return spec.takes_norm
    options = {option for entry in MODELS.values() for option in entry.options}
    return factor in spec.options or factor not in options


def _pairs(row: dict[str, str]) -> set[frozenset]:
    return {frozenset(pair) for pair in itertools.combinations(row.items(), 2)}


def _merit(row: dict[str, str], size: dict[str, int], seen: frozenset) -> tuple[int, int]:
    """A candidate row's merit: the endpoints the core accepts it at, then its new pairs."""
    answered = sum(refusal(name, size | row | RUN) is None for name in ENDPOINTS)
    return answered, len(_pairs(row) - seen)


@functools.cache
def covering_rows() -> list[dict[str, Any]]:
    """The design's rows (see the module rule): each the settings of one call at SMALL shape,
    with MLP_SIZE for a model that takes hidden layers. Of the candidates for a row, those
    the core accepts at the most endpoints come first, then those covering the most new pairs:
    a combination refused whatever else is picked is still called, and its refusal checked."""
    seen: set[frozenset] = set()
    rows = []
    for recipe, model in itertools.product(*PAIR.values()):
        free = [name for name in OTHERS if takes(model, name)]
        candidates = [
            {"compute_dtype": recipe, "model": model, **dict(zip(free, values, strict=True))}
            for values in itertools.product(*(OTHERS[name] for name in free))
        ]
        size = {**SMALL, **(MLP_SIZE if "hidden_layers" in MODELS[model].options else {})}
        merit = functools.partial(_merit, size=size, seen=frozenset(seen))
        best = max(candidates, key=merit)  # the first of equals
        seen |= _pairs(best)
        rows.append(size | best)
    _check_coverage(rows)
    return rows


def _check_coverage(rows: list[dict[str, Any]]) -> None:
    """The design's promise, checked as it is built: every value of every factor in some row,
    and every pair of values of two factors that every model takes (the MLP's own options
    vary over its rows alone, too few for all their pairs)."""
    for name, values in {**PAIR, **OTHERS}.items():
        missing = set(values) - {row[name] for row in rows if name in row}
        assert not missing, f"no row has {name} = {sorted(missing)}"
    seen = set().union(*(_pairs(row) for row in rows))
    shared = [name for name in OTHERS if all(takes(model, name) for model in MODELS)]
    for first, second in itertools.combinations(shared, 2):
        for pair in itertools.product(OTHERS[first], OTHERS[second]):
            wanted = frozenset({(first, pair[0]), (second, pair[1])})
            assert wanted in seen, f"no row has {sorted(wanted)}"


def non_defaults(settings: dict[str, Any]) -> set[str]:
    """The settings that differ from the table's defaults."""
    default = defaults()
    return {name for name, value in settings.items() if value != default[name]}


def refusal(endpoint: str, settings: dict[str, Any]) -> str | None:
    """The message of the ConfigError the core raises for ``settings`` at ``endpoint`` (the
    step's work and memory, the downloads' rows, the sweep's, the run's and the comparison's
    caps, first call included), or None when the core accepts them: what the app must answer
    with."""
    try:
        config = StepConfig(**settings)
        if endpoint == "downloads":
            check_downloads(config)
        elif endpoint == "sweep":
            check_sweep_work(config, sweep_exponents(config.compute_dtype).size)
        elif endpoint == "dynamics":
            config.check_run()
        elif endpoint == "compare":
            check_compare(config)
    except ConfigError as error:
        return str(error)
    return None


def _plain(value: Any) -> Any:
    """``value`` as the JSON Gradio sends: models dumped, tuples as lists."""
    if isinstance(value, BaseModel):
        return _plain(value.model_dump())
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def file_like(outputs: Any) -> list[dict]:
    """Every dict in ``outputs`` that gradio_client takes for a file and downloads: its own
    predicates, ``is_file_obj`` (a string under ``path``, for every protocol but sse_v2.1) and
    ``is_file_obj_with_meta`` (that and gradio.FileData's meta), applied as its ``traverse``
    applies them."""
    found: list[dict] = []

    def keep(entry: dict) -> dict:
        found.append(entry)
        return entry

    plain = _plain(outputs)
    for predicate in (client_utils.is_file_obj, client_utils.is_file_obj_with_meta):
        client_utils.traverse(plain, keep, predicate)
    return found
