"""Compiled programs on disk (``playground.core.step.compile_cache``): saved, bounded, read back."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

from playground.core.step import compile_cache

ROOT = pathlib.Path(__file__).resolve().parents[3]
# A fresh process compiles a program of the table, forgets it (as an evicted program), and runs
# it again; JAX's monitoring events say whether the second compile was read from the disk.
SCRIPT = """
import json, sys
import jax, numpy as np
from playground.core.step import compile_cache
from playground.core.step import compiled
hits = []
jax.monitoring.register_event_listener(
    lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None
)
compile_cache.MIN_COMPILE_SECONDS = 0  # the test's program compiles in milliseconds
folder = compile_cache.enable()

@compiled.program()
def polynomial(x):
    return (x * 3 + 1) ** 2 / 7

x = np.linspace(-2, 2, 64, dtype=np.float32)
first = np.asarray(polynomial(x))
compiled.MAX_PROGRAMS = 0
polynomial(x[:32])  # another program evicts the first
again = np.asarray(polynomial(x))
saved = [p for p in folder.iterdir() if not p.name.startswith(".")]
print(json.dumps({
    "folder": str(folder), "saved": len(saved), "hits": len(hits),
    "same": first.tobytes() == again.tobytes(),
    "max_size": jax.config.jax_compilation_cache_max_size,
}))
"""


def test_a_program_is_saved_within_the_bound_and_read_back_bit_for_bit(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env |= {"PLAYGROUND_COMPILE_CACHE": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.splitlines()[-1])
    assert result["folder"] == str(tmp_path / "cache")
    assert result["saved"] >= 2 and result["hits"] >= 1 and result["same"]
    assert result["max_size"] == compile_cache.MAX_BYTES


def test_the_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("PLAYGROUND_COMPILE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert compile_cache.folder() == tmp_path / "playground" / "compiled"
    monkeypatch.setenv("PLAYGROUND_COMPILE_CACHE", str(tmp_path / "mine"))
    assert compile_cache.folder() == tmp_path / "mine"
    monkeypatch.setenv("PLAYGROUND_COMPILE_CACHE", "0")
    assert compile_cache.folder() is None and compile_cache.enable() is None
    # an operator's own JAX cache folder is left to JAX
    monkeypatch.setenv("PLAYGROUND_COMPILE_CACHE", str(tmp_path / "mine"))
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", str(tmp_path / "jax"))
    assert compile_cache.enable() is None and not (tmp_path / "mine").exists()
