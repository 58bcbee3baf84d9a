"""Running a compiled program on a config's batch: batch -> jit -> one transfer -> frozen numpy.

Rule: every compiled program of the page (the step report, the sweep, the dynamics) takes the
same leading arguments ``(model_seed, x, y, lr, loss_scale)``; the seed, the rate and the scale
are traced, so one executable serves every value of them, and only shapes and the names passed as
static keywords (the dtype, ...) compile anew. Results come back to the host, one transfer
per output array, and are made read-only, so no JAX state and no mutable array leaks into the
views.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from playground.core.data import make_batch
from playground.core.settings import StepConfig

# How many compiled programs (one per program, shapes and static settings) may be kept at once.
# Each holds a few MB; past the bound every cache is cleared, so a public server's memory stays
# flat however many shapes its visitors try, at the price of recompiling the ones still in use.
MAX_PROGRAMS = int(os.environ.get("PLAYGROUND_MAX_PROGRAMS", "16"))
_programs: set[tuple] = set()
_programs_lock = threading.Lock()


def _dtype(array: Any) -> np.dtype:
    return np.dtype(array.dtype) if hasattr(array, "dtype") else np.result_type(array)


def _remember(program: Callable[..., Any], arrays: tuple, static: dict[str, Any]) -> None:
    """Count the program this call compiles; clear JAX's caches when there are too many."""
    signature = (
        program,
        tuple((np.shape(a), _dtype(a).str) for a in jax.tree.leaves(arrays)),
        tuple(sorted(static.items())),
    )
    with _programs_lock:
        if signature in _programs:
            return
        if len(_programs) >= MAX_PROGRAMS:
            jax.clear_caches()  # the compiled executables and the traces behind them
            _programs.clear()
        _programs.add(signature)


def forget_counted() -> None:
    """Stop counting the programs compiled so far (the start-up warm-up's tiny shared ones):
    they stay compiled until the next clear, and visitors' programs get all MAX_PROGRAMS
    places before it."""
    with _programs_lock:
        _programs.clear()


def freeze(tree: Any) -> Any:
    """``tree`` with every numpy array leaf made read-only (in place; returns the tree)."""
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, np.ndarray):
            leaf.flags.writeable = False
    return tree


def run_compiled(
    program: Callable[..., Any],
    config: StepConfig,
    *extra: Any,
    batch: tuple[np.ndarray, np.ndarray] | None = None,
    **static: Any,
) -> Any:
    """``program(seed, x, y, lr, loss_scale, *extra, **static)``, frozen.

    (x, y) is ``batch`` (a visitor's own data) when given, else config's synthetic batch.
    """
    x, y = batch if batch is not None else make_batch(config)
    _remember(program, (x, y, *extra), static)
    outputs = program(
        np.uint32(config.model_seed),
        x,
        y,
        np.float32(config.lr),
        np.float32(config.loss_scale),
        *extra,
        **static,
    )
    # np.asarray per leaf: on CPU it is a view of the result buffer, cheaper than device_get.
    return freeze(jax.tree.map(np.asarray, outputs))
