"""A visitor's own data: a CSV file of numbers whose last D_out columns are the targets.

Rule, for the text of a file and the setting d_out:

    at most MAX_BYTES; cells split by commas (the csv module's dialect); a line ends at LF,
      CRLF or a lone CR (old Mac exports); a cell holds at most the csv module's field limit
    the first row is a header when none of its cells is a number, and data otherwise
    every data row has as many cells as the first; every cell is a finite float32 number
      written in ASCII decimal notation (``-1.5``, ``.5``, ``2e-3``; no ``1_000``, no
      non-ASCII digits, no hex), or a non-finite word that is then refused as not finite
    1 <= data rows <= the n setting's maximum; the last d_out columns are y, the rest x, with
      1 <= columns of x <= the d_in setting's maximum and d_out <= the d_out setting's maximum

A file that breaks a rule is refused with a ConfigError on ``data`` that names the row and the
column as a spreadsheet counts them (from 1, the header row included). The arrays are float32
and read-only; nothing is written anywhere.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import dataclass

import numpy as np

from playground.core.compiled import freeze
from playground.core.settings import ConfigError, StepConfig, settings, shown

MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class UserData:
    """Parsed data: x (N, D_in) and y (N, D_out) float32, read-only; ``name`` for the page."""

    name: str
    x: np.ndarray
    y: np.ndarray

    def fit(self, config: StepConfig) -> StepConfig:
        """``config`` with N and D_in taken from the data (D_out chose the split already)."""
        return config.replace(n=self.x.shape[0], d_in=self.x.shape[1])


def fitted(
    config: StepConfig, data: UserData | None
) -> tuple[StepConfig, tuple[np.ndarray, np.ndarray] | None]:
    """(config fitted to the data, the batch to use instead of the synthetic one) or (config,
    None) without data."""
    if data is None:
        return config, None
    return data.fit(config), (data.x, data.y)


def _refuse(message: str) -> ConfigError:
    return ConfigError("data", f"data (your CSV file): {message}")


# ASCII decimal notation only: Python's float() also reads "1_000", Arabic-Indic and
# full-width digits, which a spreadsheet would not show as the number float() makes of them.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_NON_FINITE = re.compile(r"[+-]?(?:inf|infinity|nan)", re.ASCII | re.IGNORECASE)


def _number(text: str) -> float | None:
    """The value of a cell in ASCII decimal notation (or a non-finite word), else None."""
    cell = text.strip(" \t")
    if _DECIMAL.fullmatch(cell) or _NON_FINITE.fullmatch(cell):
        return float(cell)
    return None


def _rows(text: str) -> list[list[str]]:
    """The non-blank rows of ``text``; a csv module error becomes a refusal naming the row (and
    the column, for a cell over the field limit) in this module's words."""
    reader = csv.reader(io.StringIO(text, newline=None))  # newline=None: CR, LF, CRLF end lines
    rows = []
    try:
        for row in reader:
            if any(cell.strip() for cell in row):
                rows.append(row)
    except csv.Error:
        line = reader.line_num
        raw = text.splitlines()[line - 1] if line else ""
        limit = csv.field_size_limit()
        long_cells = [c for c, cell in enumerate(raw.split(","), 1) if len(cell) > limit]
        if long_cells:
            raise _refuse(
                f"row {line}, column {long_cells[0]} has more than {limit:,} characters; a "
                "cell holds one number"
            ) from None
        raise _refuse(f"row {line} cannot be read as comma-separated cells") from None
    return rows


def parse_csv(content: bytes, d_out: int, name: str = "data.csv") -> UserData:
    """The UserData of a CSV file's bytes (see the module rule); ConfigError naming the cell."""
    if len(content) > MAX_BYTES:
        raise _refuse(f"the file has {len(content):,} bytes; at most {MAX_BYTES:,}")
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise _refuse(f"the file is not UTF-8 text (byte {error.start + 1})") from None
    rows = _rows(text)
    if not rows:
        raise _refuse("the file is empty")
    first_data = 1 if all(_number(cell) is None for cell in rows[0]) else 0
    data = rows[first_data:]
    if not data:
        raise _refuse("the file has a header row and no data rows")
    table = settings()
    max_rows = int(table["n"].high)
    if len(data) > max_rows:
        raise _refuse(f"the file has {len(data):,} data rows; at most {max_rows:,}")
    width = len(data[0])
    values = np.empty((len(data), width), np.float64)
    for r, row in enumerate(data):
        line = r + first_data + 1
        if len(row) != width:
            raise _refuse(f"row {line} has {len(row)} cells where row {first_data + 1} has {width}")
        for c, cell in enumerate(row):
            number = _number(cell)
            if number is None:
                raise _refuse(f"row {line}, column {c + 1} is {shown(cell.strip())}, not a number")
            with np.errstate(over="ignore"):  # a value beyond float32 is refused just below
                single = np.float32(number)
            if not math.isfinite(number) or not math.isfinite(single):
                raise _refuse(
                    f"row {line}, column {c + 1} is {shown(cell.strip())}; cells must be "
                    "finite float32 numbers"
                )
            values[r, c] = number
    d_in = width - d_out
    max_in, max_out = int(table["d_in"].high), int(table["d_out"].high)
    if d_in < 1:
        raise ConfigError(
            "d_out",
            f"d_out (output width D_out) must leave at least one input column of your {width}; "
            f"at most {width - 1}; got {d_out}",
        )
    if d_in > max_in:
        raise _refuse(f"{d_in} input columns (all but the last d_out = {d_out}); at most {max_in}")
    if d_out > max_out:
        raise _refuse(f"d_out = {d_out} target columns; at most {max_out}")
    matrix = values.astype(np.float32)
    return UserData(name=name, x=freeze(matrix[:, :d_in].copy()), y=freeze(matrix[:, d_in:].copy()))
