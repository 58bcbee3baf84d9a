"""CSV files written column by column with vectorised numpy.

Rule: comma-separated, a header row, ``\\n`` line ends, UTF-8, quoted only where a field holds
a comma (``csv`` module's QUOTE_MINIMAL; no comment lines). float32 values are written as
``float32_text`` says (the shortest decimal that reads back exactly), other floats as
``repr``, integers in decimal, flags as ``1``/``0``; a field may be left empty.

A file is blocks of rows; a block is a list of columns of equal length. A chunk of up to
CHUNK_ROWS rows is one (rows, width) uint8 buffer: every column has fixed places in it and
writes its ASCII characters there, leaving NUL bytes where it has none (a float's unused
digits, say); the file gets the buffer's bytes with the NULs dropped (np.compress). Nothing is
formatted one value at a time in Python.

Example::

    write_csv("losses.csv", ["step", "loss"], [(3, [int_column(steps), float_column(losses)])])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from playground.views.file_store import write_file
from playground.views.float32_text import FLOAT_WIDTH, fill_float32


def _int_width(values: np.ndarray) -> int:
    values = np.asarray(values, np.int64)
    largest = int(np.abs(values).max(initial=0))
    return len(str(largest)) + bool(values.size and values.min() < 0)


def _fill_int(values: np.ndarray, out: np.ndarray) -> None:
    """Write integers into ``out`` (len(values), width), right-aligned, with a sign if < 0."""
    magnitude = np.abs(np.asarray(values, np.int64))
    for place in range(out.shape[1] - 1, -1, -1):
        digit = magnitude % 10 + ord("0")
        out[:, place] = np.where((magnitude > 0) | (place == out.shape[1] - 1), digit, 0)
        magnitude = magnitude // 10
    if out.shape[1]:
        out[:, 0] = np.where(np.asarray(values) < 0, ord("-"), out[:, 0])


def _text_field(text: str) -> bytes:
    """One CSV field as the csv module's QUOTE_MINIMAL writes it."""
    if any(c in text for c in ',"\r\n'):
        text = '"' + text.replace('"', '""') + '"'
    return text.encode()


@dataclass(frozen=True)
class Column:
    """A CSV column: its width in the row buffer and ``fill(rows, out)`` for a chunk."""

    width: int
    fill: Callable[[slice, np.ndarray], None]


def float_column(values: np.ndarray, present: np.ndarray | None = None) -> Column:
    """A float column; where ``present`` is False the field is left empty.

    float32 values are formatted by ``fill_float32``; other floats (none in the reports) by
    ``repr``, which round-trips a float64.
    """
    values = np.asarray(values).ravel()
    if values.dtype == np.float32:

        def fill(rows: slice, out: np.ndarray) -> None:
            fill_float32(values[rows], out)
            if present is not None:
                out[~present[rows]] = 0

        return Column(FLOAT_WIDTH, fill)
    text = np.array([repr(float(v)).encode() for v in values])
    if present is not None:
        text[~present] = b""
    return _text_column(text)


def _text_column(text: np.ndarray) -> Column:
    """A column of per-row bytes (an ``S`` array, written as they are)."""
    table = text.view(np.uint8).reshape(text.size, text.itemsize)

    def fill(rows: slice, out: np.ndarray) -> None:
        out[:] = table[rows]

    return Column(text.itemsize, fill)


def constant_column(text: str) -> Column:
    """The same field on every row (quoted where it holds a comma)."""
    field = _text_field(text)

    def fill(rows: slice, out: np.ndarray) -> None:
        out[:] = np.frombuffer(field, np.uint8)

    return Column(len(field), fill)


def flag_column(values: np.ndarray, present: np.ndarray | None = None) -> Column:
    """1 or 0; empty where ``present`` is False."""
    values = np.asarray(values, bool).ravel()

    def fill(rows: slice, out: np.ndarray) -> None:
        text = np.where(values[rows], ord("1"), ord("0"))
        out[:, 0] = text if present is None else np.where(present[rows], text, 0)

    return Column(1, fill)


def int_column(values: np.ndarray) -> Column:
    """Integers in decimal, with a ``-`` where negative."""
    values = np.asarray(values, np.int64).ravel()
    return Column(_int_width(values), lambda rows, out: _fill_int(values[rows], out))


def index_column(shape: tuple[int, ...]) -> Column:
    """C-order multi-indices: ``"3,1"`` (quoted for its comma), ``1``, empty for 0-d."""
    widths = [_int_width([size - 1]) for size in shape]
    quoted = len(shape) > 1

    def fill(rows: slice, out: np.ndarray) -> None:
        flat = np.arange(rows.start, rows.stop)
        at = int(quoted)
        indices = np.unravel_index(flat, shape)
        for axis, (index, width) in enumerate(zip(indices, widths, strict=True)):
            if axis:
                out[:, at] = ord(",")
                at += 1
            _fill_int(index, out[:, at : at + width])
            at += width
        if quoted:
            out[:, 0] = out[:, at] = ord('"')

    return Column(sum(widths) + max(len(shape) - 1, 0) + 2 * quoted, fill)


CHUNK_ROWS = 2**14  # rows formatted at once: a few MB of buffers, which stay in cache


def _write_rows(file: Any, columns: Sequence[Column], rows: int) -> None:
    """Rows 0 .. rows - 1 of ``columns``, comma-separated, chunk by chunk."""
    starts = np.cumsum([0] + [column.width + 1 for column in columns])
    for first in range(0, rows, CHUNK_ROWS):
        part = slice(first, min(first + CHUNK_ROWS, rows))
        buffer = np.zeros((part.stop - part.start, starts[-1]), np.uint8)
        buffer[:, starts[1:] - 1] = ord(",")
        buffer[:, -1] = ord("\n")
        for column, start in zip(columns, starts, strict=False):
            column.fill(part, buffer[:, start : start + column.width])
        flat = buffer.ravel()
        file.write(np.compress(flat != 0, flat).tobytes())


Block = tuple[int, Sequence[Column]]  # (rows, columns), each column that many rows long


def write_csv(filename: str, header: Sequence[str], blocks: Sequence[Block]) -> str:
    """Write a CSV of ``header`` and blocks of (rows, columns) to the store; return its path."""

    def write(file: Any) -> None:
        file.write((",".join(header) + "\n").encode())
        for rows, columns in blocks:
            _write_rows(file, columns, rows)

    return write_file(filename, write)
