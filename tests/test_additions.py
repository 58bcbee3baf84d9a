"""The "what each addition touches" list (docs/architecture.md) names exactly the files an
addition needs.

Rule, per kind of entry (each bullet ``- a recipe:``, ``- a model:`` ...; paths in
backticks, ``playground/`` left out):

- recipe, model, optimizer: the package files the bullet names are the modules that name the
  kind's entries (a string equal to an entry's name as a dict key, a compared value, the value
  of the kind's keyword, a call's first argument or a module constant), besides the lessons,
  which choose what they teach; for recipes also the module declaring the settings recipes take.
  A recipe's names that are also format names (``bfloat16``, ``float16``) are left out: formats
  are named throughout. The bullet's test module names every entry of the kind.
- lesson: the core modules that construct a lesson (``StepLesson(...)``, ``DynamicsLesson(...)``),
  and the route that gives each its chapter.
- tab: the module that constructs a ``Section``; each section's layout lives under ``ui/tabs/``
  and its figures under ``sections/``.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re

import pytest

from playground.core.formats.dtypes import FORMATS
from playground.core.model.models import MODELS
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.recipes.registry import RECIPES, recipe_settings
from playground.ui.sections import SECTIONS

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "playground"
# kind -> (the names its registry holds that it alone names, the setting that chooses one)
KINDS = {
    "recipe": (set(RECIPES) - set(FORMATS), "compute_dtype"),
    "model": (set(MODELS), "model"),
    "optimizer": (set(OPTIMIZERS), "optimizer"),
}
LESSONS_PACKAGE = PACKAGE / "core" / "lessons"


@functools.cache
def bullets() -> dict[str, str]:
    """kind -> the bullet's text (``- a recipe: ...`` up to the next bullet)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    start = text.index("What each addition touches")
    found = re.findall(r"^- an? (\w+): (.*?)(?=^- |^\S|\Z)", text[start:], re.M | re.S)
    return {kind: " ".join(body.split()) for kind, body in found}


def named_paths(kind: str) -> set[str]:
    """The paths in backticks the bullet names (files and folders), as written."""
    return {path for path in re.findall(r"`([\w/.]+)`", bullets()[kind]) if "/" in path}


def package_files(kind: str) -> set[str]:
    return {path for path in named_paths(kind) if path.endswith(".py") and not _is_test(path)}


def _is_test(path: str) -> bool:
    return path.startswith("tests/")


def _modules() -> dict[str, ast.Module]:
    """Every package module's syntax, by its path under playground/."""
    return {
        str(path.relative_to(PACKAGE)): ast.parse(path.read_text())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def naming_constants(tree: ast.Module, field: str) -> list[ast.Constant]:
    """The string constants of ``tree`` in a naming place (see the module rule)."""
    places: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            places += [key for key in node.keys if key is not None]
        elif isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                places += operand.elts if isinstance(operand, ast.Tuple | ast.List) else [operand]
        elif isinstance(node, ast.keyword) and node.arg == field:
            places.append(node.value)
        elif isinstance(node, ast.Call) and node.args:
            places.append(node.args[0])
    places += [node.value for node in tree.body if isinstance(node, ast.Assign)]
    return [node for node in places if isinstance(node, ast.Constant)]


def naming_modules(kind: str) -> set[str]:
    names, field = KINDS[kind]
    return {
        path
        for path, tree in _modules().items()
        if not (PACKAGE / path).is_relative_to(LESSONS_PACKAGE)
        and any(node.value in names for node in naming_constants(tree, field))
    }


def declaring_modules(settings: set[str]) -> set[str]:
    """The modules whose classes declare (annotate) one of ``settings`` as a field."""
    return {
        path
        for path, tree in _modules().items()
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        for item in node.body
        if isinstance(item, ast.AnnAssign)
        and isinstance(item.target, ast.Name)
        and item.target.id in settings
    }


def constructing_modules(classes: set[str], under: str) -> set[str]:
    return {
        path
        for path, tree in _modules().items()
        if path.startswith(under)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in classes
    }


def test_the_architecture_page_lists_every_kind_of_addition():
    assert set(bullets()) == {*KINDS, "lesson", "tab"}
    for kind in bullets():
        for path in named_paths(kind):
            where = ROOT / path if _is_test(path) else PACKAGE / path
            assert where.exists(), f"the {kind} bullet names {path}, which is missing"


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_entry_touches_the_files_its_bullet_names(kind):
    needed = naming_modules(kind)
    if kind == "recipe":
        needed |= declaring_modules(set(recipe_settings()))
    assert package_files(kind) == needed
    names, _ = KINDS[kind]
    for test_module in (path for path in named_paths(kind) if _is_test(path)):
        constants = {
            node.value
            for node in ast.walk(ast.parse((ROOT / test_module).read_text()))
            if isinstance(node, ast.Constant)
        }
        assert names <= constants, f"{test_module} has no reference for {names - constants}"


def test_a_lesson_touches_the_modules_that_construct_lessons_and_the_route():
    """A lesson is built where lessons are, and has its chapter in the route, which teaches
    every lesson once (``tests/core/lessons/test_route.py``)."""
    constructing = constructing_modules({"StepLesson", "DynamicsLesson"}, "core/")
    assert package_files("lesson") == constructing | {"core/lessons/route.py"}


def test_a_tab_touches_the_sections_registry_its_layout_and_its_section_package():
    assert package_files("tab") == constructing_modules({"Section"}, "")
    assert {"ui/tabs/", "sections/"} <= named_paths("tab")
    for section in SECTIONS:
        assert section.build.__module__.startswith("playground.ui.tabs."), section.label
        drawn_by = {figure.__module__ for figure in section.figures.values()}
        assert all(module.startswith("playground.sections.") for module in drawn_by)
