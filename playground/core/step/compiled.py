"""Running a compiled program on a config's batch: batch -> jit -> one transfer -> frozen numpy.

Rule: every compiled program of the page (the step report, the sweep, the dynamics) takes the
same leading arguments ``(model_seed, x, y, lr, loss_scale)``; the seed, the rate and the scale
are traced, so one executable serves every value of them, and only shapes and the names passed as
static keywords (the dtype, ...) compile anew. Results come back to the host, one transfer
per output array, and are made read-only, so no JAX state and no mutable array leaks into the
views.

The executables are kept in one table, least recently used first out::

    key       (program, every argument's shape and dtype, the static keywords)
    hit       the key's executable runs, and becomes the most recently used
    miss      the program is jitted afresh for this key alone (a new function object, which
              JAX's own caches hold weakly) and compiled by its first call; past MAX_PROGRAMS
              the least recently used entry is dropped, alone, and its executable, trace and
              lowering go with it

so a public server's memory stays within about MAX_PROGRAMS programs however many shapes its
users try, and a workload cycling fewer programs than that never recompiles.

Example::

    >>> @program(static_argnames=("power",))
    ... def raised(x, *, power):
    ...     return x**power
    >>> float(raised(np.float32(3), power=2)), compiles(raised)
    (9.0, 1)
"""

from __future__ import annotations

import collections
import functools
import os
import threading
from collections.abc import Callable, Mapping
from typing import Any

import jax
import numpy as np

from playground.core.data.synthetic import make_batch
from playground.core.frozen import freeze
from playground.core.settings.settings import StepConfig

# The cap is sized by memory: kept programs may hold PROGRAM_MEMORY of the server's memory (a
# Space's 16 GB holds it beside the requests' 1 GB each), and one holds at most PROGRAM_BYTES
# (its executable, trace and lowering, with a margin over what bench/bench_load.py's soak
# prints), so the programs the warm-up compiles (every endpoint x model x recipe at the
# defaults) stay. PLAYGROUND_MAX_PROGRAMS sets the count instead.
PROGRAM_MEMORY = 2**30
PROGRAM_BYTES = 16 * 2**20
MAX_PROGRAMS = int(os.environ.get("PLAYGROUND_MAX_PROGRAMS", PROGRAM_MEMORY // PROGRAM_BYTES))

_table: collections.OrderedDict[tuple, Callable[..., Any]] = collections.OrderedDict()
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
        return executable(self, args, static)(*args, **static)

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


def executable(program: Program, args: tuple, static: dict[str, Any]) -> Callable[..., Any]:
    """The table's entry for ``program`` on these arguments (see the module rule)."""
    key = (
        program,
        tuple((np.shape(a), _dtype(a)) for a in jax.tree.leaves(args)),
        jax.tree.structure(args),
        tuple(sorted(static.items())),
    )
    with _table_lock:
        if key in _table:
            _table.move_to_end(key)
            return _table[key]
        _table[key] = jitted = program.jitted()
        _compiles[program] += 1
        while len(_table) > max(1, MAX_PROGRAMS):
            _table.popitem(last=False)
        return jitted


def compiles(program: Program) -> int:
    """How many times ``program`` was compiled afresh in this process (table misses)."""
    with _table_lock:
        return _compiles[program]


def kept() -> list[tuple[Program, tuple, tuple]]:
    """The table's keys without the tree structure, least recently used first."""
    with _table_lock:
        return [(key[0], key[1], key[3]) for key in _table]


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
