"""The table of compiled programs (``core.step.compiled``): least recently used out, alone."""

from __future__ import annotations

import collections
import gc
import weakref

import numpy as np
import pytest

from playground.core.step import compiled


@compiled.program(static_argnames=("power",))
def _raised(x, *, power):
    return x**power


@pytest.fixture
def table(monkeypatch):
    """An empty table of at most three programs, apart from the rest of the suite's."""
    monkeypatch.setattr(compiled, "_table", collections.OrderedDict())
    monkeypatch.setattr(compiled, "_compiles", collections.Counter())
    monkeypatch.setattr(compiled, "MAX_PROGRAMS", 3)


def _rows(rows: int) -> np.ndarray:
    return np.arange(rows, dtype=np.float32)


def _kept_rows() -> list[int]:
    """The batch size of each kept program, least recently used first."""
    return [shapes[0][0][0] for _, shapes, _ in compiled.kept()]


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
