"""The export refuses, by name, a model or optimizer its framework's template does not build.

The templates build their models and optimizers by name; the registries say which of their
entries each framework exports (``ModelSpec.scripts``, ``OptimizerSpec.scripts``). A throwaway
model or optimizer added to its registry (monkeypatched) with no script is refused for both
frameworks, naming itself and the entries the template builds, as the template's own text reads
them.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

from playground.core.model.models import MODELS
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.settings.settings import ConfigError, StepConfig
from playground.views.export import FRAMEWORKS, export_script

TEMPLATES = pathlib.Path(__file__).resolve().parents[2] / "playground" / "core" / "export"
TEMPLATE_OF = {"jax": TEMPLATES / "jax_script.py", "pytorch": TEMPLATES / "torch_script.py"}
REGISTRIES = {"model": MODELS, "optimizer": OPTIMIZERS}


def built_by_template(framework: str, field: str) -> list[str]:
    """The names the template's text builds for ``field``: those of its ``FIELD not in (...)``
    guard, or else its ``FIELD == "name"`` branches, or the keys of its ``FIELDS`` table."""
    text, constant = TEMPLATE_OF[framework].read_text(), field.upper()
    guard = re.search(rf"{constant} not in \(([^)]*)\)", text)
    if guard:
        return re.findall(r'"(\w+)"', guard[1])
    branches = re.findall(rf'{constant} == "(\w+)"', text)
    table = re.search(rf"^{constant}S = \{{([^}}]*)\}}", text, re.M)
    keys = re.findall(r'"(\w+)":', table[1]) if table else []
    return branches + keys + re.findall(rf'^{constant}S\["(\w+)"\] =', text, re.M)


@pytest.mark.parametrize("field", list(REGISTRIES))
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_the_registry_exports_what_each_template_builds(framework, field):
    exported = [name for name, spec in REGISTRIES[field].items() if framework in spec.scripts]
    assert exported and sorted(exported) == sorted(built_by_template(framework, field))


@pytest.mark.parametrize("field", list(REGISTRIES))
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_an_entry_no_template_builds_is_refused_by_name(framework, field, monkeypatch):
    registry = REGISTRIES[field]
    first = next(iter(registry.values()))
    monkeypatch.setitem(registry, "throwaway", dataclasses.replace(first, scripts=()))
    config = StepConfig(**{field: "throwaway"})
    with pytest.raises(ConfigError) as refusal:
        export_script(config, framework=framework)
    assert refusal.value.field == field and isinstance(refusal.value, ValueError)
    built = [name for name in registry if name in built_by_template(framework, field)]
    assert str(refusal.value) == (
        f"{field}: the exported {framework} script builds the {field}s {', '.join(built)}; "
        "got 'throwaway'"
    )
