"""app.py's allocator rule: glibc's malloc arenas capped before any thread starts.

The rule's effect on memory is measured by bench/bench_load.py (RSS over 6,000 mixed calls);
here, in fresh interpreters, the function app.py runs first is taken by glibc, and an operator's
own MALLOC_ARENA_MAX is left alone. The function is loaded from app.py itself without building
the page (the module builds it at import).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parents[1] / "app.py"


def _run_rule(env: dict[str, str]) -> str:
    tree = ast.parse(APP.read_text())
    keep = [
        node
        for node in tree.body
        if isinstance(node, ast.Import | ast.FunctionDef)
        or (isinstance(node, ast.Assign) and node.targets[0].id.isupper())
    ]
    source = ast.unparse(ast.Module(body=keep, type_ignores=[]))
    program = source + "\nprint(limit_malloc_arenas(), MALLOC_ARENAS)\n"
    result = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def test_app_caps_malloc_arenas_at_start():
    env = {key: value for key, value in os.environ.items() if key != "MALLOC_ARENA_MAX"}
    assert _run_rule(env) == "True 2"


def test_an_operators_malloc_arena_max_wins():
    assert _run_rule(os.environ | {"MALLOC_ARENA_MAX": "4"}) == "False 2"
