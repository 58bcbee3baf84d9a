"""The tables of compiled programs (``core.step.compiled``): the pinned ones kept, visitors'
least recently used out, alone, past a count."""

from __future__ import annotations

import collections
import gc
import os
import subprocess
import sys
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest

from playground.core.step import compiled


@compiled.program(static_argnames=("power",))
def _raised(x, *, power):
    return x**power


@pytest.fixture
def table(monkeypatch):
    """Empty tables, of at most three visitors' programs, apart from the rest of the suite's."""
    monkeypatch.setattr(compiled, "_table", collections.OrderedDict())
    monkeypatch.setattr(compiled, "_pinned", {})
    monkeypatch.setattr(compiled, "_compiles", collections.Counter())
    monkeypatch.setattr(compiled, "MAX_PROGRAMS", 3)


def _rows(rows: int) -> np.ndarray:
    return np.arange(rows, dtype=np.float32)


def _kept_rows() -> list[int]:
    """The batch size of each kept visitors' program, least recently used first."""
    return [shapes[0][0][0] for _, shapes, _ in compiled.kept()]


def _pinned_rows() -> list[int]:
    """The batch size of each pinned program, in the order they were pinned."""
    return [shapes[0][0][0] for _, shapes, _ in compiled.kept_pinned()]


def test_past_the_cap_only_the_least_recently_used_program_is_evicted(table):
    for rows in (1, 2, 3):
        _raised(_rows(rows), power=2)
    assert _kept_rows() == [1, 2, 3]
    # a hit moves its program to the back: 2 is now the one unused longest
    np.testing.assert_array_equal(_raised(_rows(1), power=2), _rows(1) ** 2)
    _raised(_rows(4), power=2)
    assert _kept_rows() == [3, 1, 4]
    assert compiled.compiles(_raised) == 4
    # the kept ones run without compiling; the evicted one compiles again, evicting 3
    _raised(_rows(1), power=2)
    _raised(_rows(4), power=2)
    assert compiled.compiles(_raised) == 4
    np.testing.assert_array_equal(_raised(_rows(2), power=2), _rows(2) ** 2)
    assert compiled.compiles(_raised) == 5 and _kept_rows() == [1, 4, 2]


def test_a_static_setting_and_a_dtype_are_programs_of_their_own(table):
    _raised(_rows(2), power=2)
    _raised(_rows(2), power=3)
    _raised(_rows(2).astype(np.float16), power=2)
    assert compiled.compiles(_raised) == 3
    assert [static for *_, static in compiled.kept()] == [
        (("power", 2),),
        (("power", 3),),
        (("power", 2),),
    ]
    np.testing.assert_array_equal(_raised(_rows(2), power=3), _rows(2) ** 3)
    assert compiled.compiles(_raised) == 3


def test_an_evicted_program_is_freed(table):
    first = weakref.ref(compiled.executable(_raised, (_rows(1),), {"power": 2}))
    for rows in (2, 3, 4):
        _raised(_rows(rows), power=2)
    gc.collect()
    assert first() is None


def test_pinned_programs_stay_whatever_visitors_try(table):
    with compiled.pinned():
        for rows in (1, 2):
            _raised(_rows(rows), power=2)
    assert _pinned_rows() == [1, 2] and _kept_rows() == []
    for rows in range(10, 30):  # twenty new shapes, far past the visitors' three
        np.testing.assert_array_equal(_raised(_rows(rows), power=2), _rows(rows) ** 2)
    assert _kept_rows() == [27, 28, 29]
    assert _pinned_rows() == [1, 2]
    assert compiled.compiles(_raised) == 22
    # the pinned ones run without compiling, outside the block as inside
    for rows in (1, 2):
        np.testing.assert_array_equal(_raised(_rows(rows), power=2), _rows(rows) ** 2)
    assert compiled.compiles(_raised) == 22 and _kept_rows() == [27, 28, 29]


def test_a_visitors_program_run_while_pinning_moves_to_the_pinned_table(table):
    _raised(_rows(5), power=2)
    assert _kept_rows() == [5]
    with compiled.pinned():
        _raised(_rows(5), power=2)
    assert _kept_rows() == [] and _pinned_rows() == [5]
    assert compiled.compiles(_raised) == 1


def test_pinning_holds_only_in_its_own_thread(table):
    with compiled.pinned():
        visitor = threading.Thread(target=_raised, args=(_rows(7),), kwargs={"power": 2})
        visitor.start()
        visitor.join()
        _raised(_rows(8), power=2)
    assert _kept_rows() == [7] and _pinned_rows() == [8]


def _max_programs(**environ: str) -> int:
    """MAX_PROGRAMS as a fresh process reads it, with ``environ`` for PLAYGROUND_ variables."""
    read = "from playground.core.step import compiled; print(compiled.MAX_PROGRAMS)"
    base = {k: v for k, v in os.environ.items() if k != "PLAYGROUND_MAX_PROGRAMS"}
    out = subprocess.run(
        [sys.executable, "-c", read],
        env=base | {"JAX_PLATFORMS": "cpu"} | environ,
        cwd=Path(__file__).resolve().parents[3],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout)


def test_the_visitors_count_fits_the_memory_guarantee_and_its_setting_overrides_it():
    # the public guarantee: visitors' new shapes add at most 80 MB
    assert _max_programs() * compiled.PROGRAM_BYTES <= 80 * 10**6
    assert _max_programs(PLAYGROUND_MAX_PROGRAMS="7") == 7
