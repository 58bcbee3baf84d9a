"""Running a compiled program on a config's batch: batch -> jit -> one transfer -> frozen numpy.

Rule: every compiled program of the page (the step report, the sweep, the dynamics) takes the
same leading arguments ``(model_seed, x, y, lr, loss_scale)``; the seed, the rate and the scale
are traced, so one executable serves every value of them, and only shapes and the names passed as
static keywords (the dtype, ...) compile anew. Results come back to the host, one transfer
per output array, and are made read-only, so no JAX state and no mutable array leaks into the
views.

The executables are kept in two tables, by one key::

    key       (program, every argument's shape, dtype and whether it is a Python scalar,
              which JAX types weakly, the static keywords)
    pinned    the programs run inside ``pinned()`` (the start-up warm-up's: every endpoint x
              model x recipe at the page's defaults, and the route's runs): kept for the
              process's life, whatever shapes visitors try
    visitors' every other program, least recently used first out, at most MAX_PROGRAMS
              (PLAYGROUND_MAX_PROGRAMS when set)
    hit       the key's executable runs; a visitors' one becomes the most recently used, and
              one run inside ``pinned()`` moves to the pinned table
    miss      the program is lowered and compiled for this key alone, ahead of time (a new
              jit of the function, which JAX's own caches hold weakly), and only the executable
              is kept: its trace and lowering go as the compile ends; past MAX_PROGRAMS the
              least recently used visitors' entry is dropped, alone, and its executable with it

so a public server keeps at most MAX_PROGRAMS visitors' programs however many shapes they try
(JAX's own per-shape caches, of traces and abstract values, are bounded apart by JAX), the
warm-up's programs never compile again, and a workload cycling fewer programs than MAX_PROGRAMS
never recompiles.

Example::

    >>> @program(static_argnames=("power",))
    ... def raised(x, *, power):
    ...     return x**power
    >>> float(raised(np.float32(3), power=2)), compiles(raised)
    (9.0, 1)
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import functools
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import jax
import numpy as np

from playground.core.data.synthetic import make_batch
from playground.core.frozen import freeze
from playground.core.settings.settings import StepConfig

# Visitors' programs are bounded by count, sized by memory: they may add PROGRAM_MEMORY to the
# server's memory (the public Space's guarantee of 80 MB for visitors' new shapes, less a
# margin for what JAX keeps per traced shape beside the table), and one adds about
# PROGRAM_BYTES (its executable, with what it leaves in the heap: bench/bench_load.py's memory
# row over MAX_PROGRAMS). The pinned programs are apart: a fixed set, the warm-up's.
# PLAYGROUND_MAX_PROGRAMS sets the count instead.
PROGRAM_MEMORY = 64 * 2**20
PROGRAM_BYTES = 9 * 2**18  # 2.25 MiB
MAX_PROGRAMS = int(os.environ.get("PLAYGROUND_MAX_PROGRAMS", PROGRAM_MEMORY // PROGRAM_BYTES))

_table: collections.OrderedDict[tuple, Callable[..., Any]] = collections.OrderedDict()
_pinned: dict[tuple, Callable[..., Any]] = {}
_pinning: contextvars.ContextVar[bool] = contextvars.ContextVar("pinning", default=False)
_compiles: collections.Counter[Program] = collections.Counter()
_table_lock = threading.Lock()


class Program:
    """A function compiled once per key of the table (see the module rule); call it as the
    function. ``__wrapped__`` is the plain function."""

    def __init__(
        self,
        fun: Callable[..., Any],
        static_argnames: tuple[str, ...],
        compiler_options: Mapping[str, Any] | None,
    ) -> None:
        functools.update_wrapper(self, fun)
        self.static_argnames = static_argnames
        self.compiler_options = dict(compiler_options or {})

    def __call__(self, *args: Any, **static: Any) -> Any:
        return executable(self, args, static)(*args)

    def lower(self, *args: Any, **static: Any) -> jax.stages.Lowered:
        """The program lowered for these arguments (JAX's ahead-of-time ``lower``), outside the
        table: to read its text, or compile it apart."""
        return self.jitted().lower(*args, **static)

    def jitted(self) -> Callable[..., Any]:
        """A new jit of the function: its own caches, which live as long as it does."""
        return jax.jit(
            functools.partial(self.__wrapped__),
            static_argnames=self.static_argnames,
            compiler_options=self.compiler_options or None,
        )


def program(
    *, static_argnames: tuple[str, ...] = (), compiler_options: Mapping[str, Any] | None = None
) -> Callable[[Callable[..., Any]], Program]:
    """Decorator: the function as a ``Program`` of the table, jitted with these options."""
    return lambda fun: Program(fun, tuple(static_argnames), compiler_options)


def _dtype(array: Any) -> str:
    return (np.dtype(array.dtype) if hasattr(array, "dtype") else np.result_type(array)).str


def _kept(key: tuple) -> jax.stages.Compiled | None:
    """The key's executable, moved as a hit moves it (see the module rule); None on a miss.
    Called under the table's lock."""
    if key in _pinned:
        return _pinned[key]
    found = _table.pop(key, None)
    if found is not None:
        _keep(key, found)
    return found


def _keep(key: tuple, found: jax.stages.Compiled) -> None:
    """Put ``found`` in the pinned table or as the visitors' most recently used, evicting
    past MAX_PROGRAMS. Called under the table's lock."""
    if _pinning.get():
        _pinned[key] = found
        return
    _table[key] = found
    while len(_table) > max(1, MAX_PROGRAMS):
        _table.popitem(last=False)


def executable(program: Program, args: tuple, static: dict[str, Any]) -> jax.stages.Compiled:
    """The table's executable for ``program`` on these arguments (see the module rule); call it
    with the arguments alone, without the static keywords."""
    key = (
        program,
        tuple(
            (np.shape(a), _dtype(a), type(a) in (bool, int, float, complex))
            for a in jax.tree.leaves(args)
        ),
        jax.tree.structure(args),
        tuple(sorted(static.items())),
    )
    with _table_lock:
        found = _kept(key)
    if found is not None:
        return found
    # compiled outside the lock, so other programs run meanwhile
    made = program.jitted().lower(*args, **static).compile()
    with _table_lock:
        found = _kept(key)  # another thread compiled it meanwhile
        if found is not None:
            return found
        _compiles[program] += 1
        _keep(key, made)
        return made


@contextlib.contextmanager
def pinned() -> Iterator[None]:
    """Within this block (in this thread, or this asyncio task), the programs run are pinned:
    kept in the pinned table, out of the visitors' (see the module rule).

    Returns:
        A context manager; what it pins stays pinned after it ends.
    """
    token = _pinning.set(True)
    try:
        yield
    finally:
        _pinning.reset(token)


def compiles(program: Program) -> int:
    """How many times ``program`` was compiled afresh in this process (table misses)."""
    with _table_lock:
        return _compiles[program]


def kept() -> list[tuple[Program, tuple, tuple]]:
    """The visitors' table's keys without the tree structure, least recently used first."""
    with _table_lock:
        return [(key[0], key[1], key[3]) for key in _table]


def kept_pinned() -> list[tuple[Program, tuple, tuple]]:
    """The pinned table's keys without the tree structure, in the order they were pinned."""
    with _table_lock:
        return [(key[0], key[1], key[3]) for key in _pinned]


def run_compiled(
    program: Program,
    config: StepConfig,
    *extra: Any,
    batch: tuple[np.ndarray, np.ndarray] | None = None,
    **static: Any,
) -> Any:
    """``program(seed, x, y, lr, loss_scale, *extra, **static)``, frozen.

    (x, y) is ``batch`` (a user's own data) when given, else config's synthetic batch.
    """
    x, y = batch if batch is not None else make_batch(config)
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
