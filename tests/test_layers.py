"""The package's layers look down only, and every module imports by itself.

Rules, read from the source with ``ast`` (imports inside functions count too):

- Layers from the bottom: ``playground.core`` < ``playground.views`` < ``playground.sections``
  < ``playground.ui`` < the entry points (``playground/__init__.py``, ``playground/__main__.py``,
  ``app.py``). A module imports only from its own layer or the layers below it.
- No import cycle between modules. Importing ``a.b.c`` also runs the packages ``a`` and ``a.b``,
  so an import reaches the ``__init__`` of every package it enters (the packages the importer
  already sits in are loaded before it and add no edge).
- ``ui/__init__.py`` and the widget helpers (``ui/widgets.py``, a leaf) pull nothing of the page
  in: no page module, no section.
- Gradio only in ``ui``: never in ``sections`` or ``views``; ``sections`` never import jax, optax
  or flax (they present, never compute); ``core`` never imports gradio or plotly.
- A compute dtype's name is tested only in the recipe registry (``core/recipes/registry.py``)
  and the dtype registry (``core/formats/dtypes.py``); a model's name only in
  ``core/model/models.py`` and the export templates (standalone scripts that build the models
  the registry says they export, by name).
- The page's layers (``ui``, ``sections``, ``views``) name no recipe, model or optimizer: no
  string in them is a registry's name, and no text of theirs (docstrings and comments too)
  names a block-scaled recipe. The names are read from the registries.
- No module under playground/ is over about 600 lines.
- Every module imports alone: in a fresh interpreter, with every ``playground`` module dropped
  from ``sys.modules`` before each import.
"""

from __future__ import annotations

import ast
import functools
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "playground"
ENTRY_POINTS = ("playground", "playground.__main__", "app")
LAYERS = ("playground.core", "playground.views", "playground.sections", "playground.ui")
TOP = len(LAYERS)  # the entry points' layer
MAX_LINES = 600
# Core's sub-packages from the bottom; "" is the foundation (core's own top-level modules).
CORE_ORDER = (
    "",
    "formats",
    "recipes",
    "model",
    "settings",
    "data",
    "step",
    "runs",
    "compare",
    "inspector",
    "tensors",
    "export",
    "lessons",
)
MAX_CORE_TOP = 12
NAME_OWNERS = {  # the names that only their registries test -> those registries
    # The PyTorch template is a standalone script (it cannot read the registry): it chooses
    # GradScaler for float16 and float8's scaled casts by name, as it builds models by name.
    "compute dtype": {
        "playground.core.recipes.registry",
        "playground.core.formats.dtypes",
        "playground.core.export.torch_script",
    },
    "model": {
        "playground.core.model.models",
        "playground.core.export.jax_script",
        "playground.core.export.torch_script",
    },
}
# The layers that present: they read every recipe, model and optimizer from its registry.
PAGE_LAYERS = ("playground.ui", "playground.sections", "playground.views")


@functools.cache
def registry_names() -> dict[str, frozenset[str]]:
    """Kind -> the names its registry holds (recipes, models, optimizers)."""
    from playground.core.model.models import MODELS
    from playground.core.model.optimizers import OPTIMIZERS
    from playground.core.recipes.registry import RECIPES

    return {
        "compute dtype": frozenset(RECIPES),
        "model": frozenset(MODELS),
        "optimizer": frozenset(OPTIMIZERS),
    }


@functools.cache
def block_recipe_names() -> frozenset[str]:
    from playground.core.recipes.registry import RECIPES

    return frozenset(name for name, entry in RECIPES.items() if entry.block is not None)


def module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache
def modules() -> dict[str, pathlib.Path]:
    """Every module of the package, and app.py, by dotted name."""
    found = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
    found["app"] = ROOT / "app.py"
    return found


@functools.cache
def syntax(name: str) -> ast.Module:
    return ast.parse(modules()[name].read_text(), filename=str(modules()[name]))


def is_package(name: str) -> bool:
    return modules()[name].name == "__init__.py"


def imported(name: str) -> list[tuple[int, str]]:
    """(line, module) for every import statement in ``name``, relative ones resolved; for
    ``from package import x`` the submodule ``package.x`` when it exists, else the package."""
    found = []
    for node in ast.walk(syntax(name)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package(name) else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.append((node.lineno, submodule if submodule in modules() else base))
    return found


def own(target: str) -> str | None:
    """The package module an import of ``target`` loads, or None for other libraries."""
    while target and target not in modules():
        target = target.rpartition(".")[0]
    return target if target.split(".")[0] == "playground" else None


def package_imports(name: str) -> list[tuple[int, str]]:
    """(line, package module) for every import of ``name`` that loads one of ours."""
    return [(line, mine) for line, target in imported(name) if (mine := own(target))]


def layer(name: str) -> int:
    if name in ENTRY_POINTS:
        return TOP
    return next(i for i, top in enumerate(LAYERS) if name == top or name.startswith(top + "."))


def edges(name: str) -> set[str]:
    """The package modules that importing ``name`` runs directly, the packages entered included."""
    runs = set()
    for _, target in package_imports(name):
        parts = target.split(".")
        for depth in range(1, len(parts) + 1):
            entered = ".".join(parts[:depth])
            if not (name == entered or name.startswith(entered + ".")):
                runs.add(entered)
    runs.discard(name)
    return runs


def reached(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges(todo.pop()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def where(name: str) -> str:
    return str(modules()[name].relative_to(ROOT))


def layer_name(name: str) -> str:
    return LAYERS[layer(name)] if layer(name) < TOP else "an entry point"


def test_every_import_looks_down_or_sideways():
    upward = {
        f"{where(name)}:{line} ({layer_name(name)}) imports {target} ({layer_name(target)})"
        for name in modules()
        for line, target in package_imports(name)
        if layer(target) > layer(name)
    }
    assert not upward, "imports that run up a layer:\n" + "\n".join(sorted(upward))


def strongly_connected() -> list[list[str]]:
    """Tarjan's algorithm over the module graph: every component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges(node)):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while not component or component[-1] != node:
                component.append(stack.pop())
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(modules()):
        if node not in index:
            visit(node)
    return components


def test_no_import_closes_a_cycle():
    cycles = strongly_connected()
    described = [
        " <-> ".join(component)
        + "\n    "
        + "\n    ".join(f"{a} -> {b}" for a in component for b in sorted(edges(a) & set(component)))
        for component in cycles
    ]
    assert not cycles, "modules that import each other (in a cycle):\n" + "\n".join(described)


# The ui package itself and its leaf of widget helpers, which the page's parts build on.
@pytest.mark.parametrize("start", ["playground.ui", "playground.ui.widgets"])
def test_ui_package_and_its_widgets_do_not_pull_the_page_in(start):
    pulled = sorted(
        name
        for name in reached(start)
        if name == "playground.ui.page" or name.startswith("playground.sections")
    )
    assert not pulled, f"importing {start} runs {pulled}"


# layer -> libraries its modules never import
FORBIDDEN = {
    "playground.core": {"gradio", "plotly"},
    "playground.views": {"gradio"},
    "playground.sections": {"gradio", "jax", "jaxlib", "optax", "flax"},
}


def test_each_layer_imports_only_its_libraries():
    wrong = [
        f"{where(name)}:{line} imports {target}"
        for name in modules()
        for top, libraries in FORBIDDEN.items()
        if name == top or name.startswith(top + ".")
        for line, target in imported(name)
        if target.split(".")[0] in libraries
    ]
    assert not wrong, "libraries imported below their layer:\n" + "\n".join(wrong)


def name_tests(tree: ast.Module) -> list[tuple[int, str, str]]:
    """(line, kind, what) wherever a compute dtype's or a model's name is tested: a comparison
    (==, !=, in, not in) with one of the names, the FLOAT8 constant, or the literals "float8" and
    "mlp" anywhere but as a dict key or a keyword argument (an output's key, a chosen value).
    One finding per line and kind."""
    chosen = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            chosen |= {id(key) for key in node.keys if key is not None}
        elif isinstance(node, ast.keyword):
            chosen.add(id(node.value))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for operand in list(operands):
                if isinstance(operand, ast.Tuple | ast.List | ast.Set):
                    operands += operand.elts
            for operand in operands:
                if (
                    isinstance(operand, ast.Constant)
                    and operand.value in registry_names()["compute dtype"]
                ):
                    found.append((node.lineno, "compute dtype", f"compares with {operand.value!r}"))
        if (isinstance(node, ast.Name) and node.id == "FLOAT8") or (
            isinstance(node, ast.Attribute) and node.attr == "FLOAT8"
        ):
            found.append((node.lineno, "compute dtype", "uses FLOAT8"))
        if isinstance(node, ast.alias) and node.name == "FLOAT8":
            found.append((node.lineno, "compute dtype", "imports FLOAT8"))
        if isinstance(node, ast.Constant) and id(node) not in chosen:
            kind = {"float8": "compute dtype", "mlp": "model"}.get(node.value)
            if kind:
                found.append((node.lineno, kind, f"tests {node.value!r}"))
    first = {(line, kind): what for line, kind, what in reversed(found)}
    return sorted((line, kind, what) for (line, kind), what in first.items())


def test_only_the_registries_test_a_dtype_or_model_name():
    wrong = [
        f"{where(name)}:{line} {what} (a {kind} name: only {sorted(NAME_OWNERS[kind])} may)"
        for name in modules()
        for line, kind, what in name_tests(syntax(name))
        if name not in NAME_OWNERS[kind]
    ]
    assert not wrong, "names tested outside their registry:\n" + "\n".join(wrong)


def page_names(source: str) -> list[tuple[int, str, str]]:
    """(line, kind, what) wherever a module of the page's layers (its ``source``) names a
    registry entry: a string that is a recipe's, a model's or an optimizer's name (a key, a
    choice, a compared value alike), and any line of its text that names a block-scaled recipe
    (in any case)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for kind, names in registry_names().items():
                if node.value in names:
                    found.append((node.lineno, kind, f"names {node.value!r}"))
    for number, line in enumerate(source.lower().splitlines(), start=1):
        for recipe_name in sorted(block_recipe_names()):
            if recipe_name in line:
                found.append((number, "compute dtype", f"writes {recipe_name!r}"))
    return sorted(set(found))


def in_page_layers(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in PAGE_LAYERS)


def test_the_page_layers_name_no_recipe_model_or_optimizer():
    wrong = [
        f"{where(name)}:{line} {what} (a {kind} name: read it from its registry)"
        for name in modules()
        if in_page_layers(name)
        for line, kind, what in page_names(modules()[name].read_text())
    ]
    assert not wrong, "registry names in ui, sections or views:\n" + "\n".join(wrong)


def test_page_names_finds_every_registry_name_and_a_block_recipe_in_a_comment():
    chosen = [name for names in registry_names().values() for name in sorted(names)]
    comments = [f"# {name.upper()} in a comment" for name in sorted(block_recipe_names())]
    found = page_names("\n".join([f"CHOSEN = {name!r}" for name in chosen] + comments))
    assert {what for _, _, what in found if what.startswith("names")} == {
        f"names {name!r}" for name in chosen
    }
    assert {kind for _, kind, _ in found} == set(registry_names())
    comment_lines = set(range(len(chosen) + 1, len(chosen) + len(comments) + 1))
    assert comment_lines <= {line for line, _, what in found if what.startswith("writes")}


def test_no_module_is_over_600_lines():
    long = {
        where(name): lines
        for name, path in modules().items()
        if name != "app" and (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def core_part(name: str) -> str | None:
    """The core sub-package ``name`` sits in ("" for core's own top-level modules), or None."""
    if not name.startswith("playground.core."):
        return None
    rest = name.removeprefix("playground.core.").split(".")
    return rest[0] if len(rest) > 1 or is_package(name) else ""


def test_core_sub_packages_are_the_known_ones_and_core_top_is_small():
    parts = {core_part(name) for name in modules()} - {None}
    unknown = parts ^ set(CORE_ORDER)
    assert not unknown, f"core sub-packages not in CORE_ORDER: {unknown}"
    top = sorted(name for name in modules() if core_part(name) == "")
    assert len(top) <= MAX_CORE_TOP, f"{len(top)} modules at core's top: {top}"


def test_core_sub_packages_import_only_those_before_them():
    rank = {part: index for index, part in enumerate(CORE_ORDER)}
    upward = {
        f"{where(name)}:{line} ({core_part(name) or 'core top'}) imports {target}"
        f" ({core_part(target) or 'core top'})"
        for name in modules()
        if core_part(name) is not None
        for line, target in package_imports(name)
        if target != "playground.core"
        and core_part(target) is not None
        and rank[core_part(target)] > rank[core_part(name)]
    }
    assert not upward, "core imports that run up a sub-package:\n" + "\n".join(sorted(upward))


# Each import runs the modules afresh; only compiling their source (when no bytecode cache was
# written, as under PYTHONDONTWRITEBYTECODE) is done once per file and content, which changes
# nothing the import runs and was about half of this check's time.
IMPORT_EACH_ALONE = """
import importlib, importlib.machinery, json, sys, traceback
compile_source = importlib.machinery.SourceFileLoader.source_to_code
compiled = {}
def source_to_code(loader, data, path, **options):
    key = (path, bytes(data))
    if key not in compiled:
        compiled[key] = compile_source(loader, data, path, **options)
    return compiled[key]
importlib.machinery.SourceFileLoader.source_to_code = source_to_code
failures = {}
for name in json.loads(sys.argv[1]):
    for loaded in [m for m in sys.modules if m == "playground" or m.startswith("playground.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except BaseException as error:
        failures[name] = traceback.format_exception_only(error)[-1].strip()
print(json.dumps(failures))
"""


def test_every_module_imports_alone():
    names = sorted(name for name in modules() if name != "app")
    # One interpreter for all: the libraries stay loaded, only the package is imported afresh.
    run = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_ALONE, json.dumps(names)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr
    failures = json.loads(run.stdout.strip().splitlines()[-1])
    assert not failures, "modules that fail to import alone:\n" + "\n".join(
        f"{name}: {error}" for name, error in failures.items()
    )


def test_architecture_page_names_every_core_sub_package_and_module():
    """The tree on the "How it is built" page (docs/architecture.md) is the package's: every
    core sub-package (as ``name/``) and every core module's file name appear in it, in
    CORE_ORDER."""
    page = (ROOT / "docs" / "architecture.md").read_text()
    tree = page[page.index("## The tree") :]
    tree = tree[tree.index("  core/") : tree.index("  views/")]
    order = [tree.index(f"    {part}/") for part in CORE_ORDER if part]
    assert order == sorted(order), "the architecture page's core tree is not in CORE_ORDER"
    files = {modules()[name].name for name in modules() if core_part(name) is not None}
    missing = sorted(f for f in files - {"__init__.py"} if f not in tree)
    assert not missing, f"core modules the architecture page's tree does not name: {missing}"
