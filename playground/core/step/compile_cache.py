"""Compiled programs on disk: JAX's persistent compilation cache, in a folder the disk keeps.

Rule: at start the app points JAX's persistent compilation cache at PLAYGROUND_COMPILE_CACHE
(default ``$XDG_CACHE_HOME/playground/compiled``, else ``~/.cache/playground/compiled``: outside
the app's own folder, which a restart deletes):

    saved     every program whose compile took at least MIN_COMPILE_SECONDS
    bounded   the folder holds at most MAX_BYTES; past it JAX deletes the least recently read
              entries (the bound also turns on its file lock, so two servers can share it)
    read      a restarted server (or another process) reads a program back instead of
              compiling it: the executable compiled from the same program and options, so no
              number changes

An operator's JAX_COMPILATION_CACHE_DIR wins (JAX reads it itself); PLAYGROUND_COMPILE_CACHE=0
turns the cache off.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax

MAX_BYTES = 256 * 2**20
# Eager operations' tiny programs compile in milliseconds: reading them back saves nothing.
MIN_COMPILE_SECONDS = 0.2


def folder() -> Path | None:
    """Where the cache lives (see the rule), or None when it is off."""
    chosen = os.environ.get("PLAYGROUND_COMPILE_CACHE")
    if chosen == "0":
        return None
    if chosen:
        return Path(chosen)
    cache_home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache_home) / "playground" / "compiled"


def enable() -> Path | None:
    """Turn the cache on (see the rule); the folder it uses, or None when it is off or an
    operator's JAX_COMPILATION_CACHE_DIR is used instead."""
    where = folder()
    if where is None or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return None
    where.mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(where))
    jax.config.update("jax_compilation_cache_max_size", MAX_BYTES)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return where
