"""The documentation site under docs/ builds with ``mkdocs build --strict``: every page in the
nav, every link and anchor between pages found, and the API reference generated from the
package's docstrings without a warning. In the full tier only (``python -m pytest --full``): the
build takes seconds and reads no numerics. The README's own checks (its length, its links) are
quick: tests/app/test_readme.py."""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

import pytest

import playground

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly_with_every_public_name_in_the_api_reference(tmp_path):
    mkdocs = shutil.which("mkdocs")
    command = [mkdocs] if mkdocs else [sys.executable, "-m", "mkdocs"]
    done = subprocess.run(
        [*command, "build", "--strict", "-d", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    api = (tmp_path / "api" / "index.html").read_text()
    missing = [name for name in playground.__all__ if f'id="playground.{name}"' not in api]
    assert not missing, f"the API reference lacks {missing}"
