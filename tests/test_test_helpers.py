"""The tests' own hygiene: helpers shared through tests/helpers.py, never through another test
module's private names, and the shared helpers' stated facts."""

from __future__ import annotations

import ast
import pathlib
from fractions import Fraction

import ml_dtypes
import pytest

from helpers import contrast, format_values, hex_rgb, luminance

TESTS = pathlib.Path(__file__).resolve().parent
TEST_MODULES = sorted(TESTS.rglob("*.py"))
# Modules that live in tests/, by the name the tests import them with (tests/ and its folders
# are on sys.path).
LOCAL_NAMES = {path.stem for path in TEST_MODULES}


def _local(module: str | None, level: int) -> bool:
    """Whether an import names a module of tests/ (relative, ``tests.<name>`` or by its name)."""
    if level > 0:
        return True
    if not module:
        return False
    return module == "tests" or module.startswith("tests.") or module.split(".")[0] in LOCAL_NAMES


def private_imports(tree: ast.AST) -> list[str]:
    """The private names (a leading underscore) a module takes from a module of tests/:
    imported by name, or read as an attribute of a test module it imported."""
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _local(node.module, node.level):
            found += [
                f"{node.module}.{alias.name}" for alias in node.names if alias.name.startswith("_")
            ]
        elif isinstance(node, ast.Import):
            modules |= {
                (alias.asname or alias.name) for alias in node.names if _local(alias.name, 0)
            }
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
        ):
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_the_check_finds_each_way_of_taking_a_private_name():
    source = (
        "from test_browser import ARTIFACTS, _open\n"
        "from .reference import _exact\n"
        "import http_calls\n"
        "http_calls._session()\n"
        "from playground.core.bounds import _private\n"  # the package's own: not a test module
    )
    assert private_imports(ast.parse(source)) == [
        "test_browser._open",
        "reference._exact",
        "http_calls._session",
    ]


@pytest.mark.parametrize("path", [p.relative_to(TESTS).as_posix() for p in TEST_MODULES])
def test_no_test_module_takes_another_test_modules_private_names(path):
    assert private_imports(ast.parse((TESTS / path).read_text())) == [], path


def test_contrast_is_wcags_ratio():
    # WCAG 2: black on white is 21:1, a colour on itself 1:1; sRGB's channel curve is
    # linear below 0.03928 (10/255 -> 10/255/12.92).
    assert contrast(hex_rgb("#ffffff"), hex_rgb("#000000")) == pytest.approx(21.0)
    assert contrast((40, 90, 160), (40, 90, 160)) == 1.0
    assert luminance((10, 10, 10)) == pytest.approx(10 / 255 / 12.92)


def test_format_values_are_every_finite_non_negative_value_once():
    values = format_values(ml_dtypes.float4_e2m1fn, 4)
    # E2M1: 0, 0.5 (the subnormal), then 1, 1.5, 2, 3, 4, 6 (the OCP MX spec's table).
    expected = [0, Fraction(1, 2), 1, Fraction(3, 2), 2, 3, 4, 6]
    assert [value for value, _ in values] == expected
    assert [raw for _, raw in values] == list(range(8))  # the sign bit clear
    # every sign-clear pattern but the all-ones exponent's (inf and 127 NaNs)
    assert len(format_values(ml_dtypes.bfloat16, 16)) == 2**15 - 2**7
