"""A user's own data: a CSV file of numbers; its shape sets N, D_in and D_out.

Rule, for the text of a file and the setting d_out:

    at most MAX_BYTES; cells split by commas (the csv module's dialect); a line ends at LF,
      CRLF or a lone CR (old Mac exports); a cell holds at most the csv module's field limit
    the first row is a header when none of its cells is a number, and data otherwise
    every data row has as many cells as the first; every cell is a finite float32 number
      written in ASCII decimal notation (``-1.5``, ``.5``, ``2e-3``; no ``1_000``, no
      non-ASCII digits, no hex), or a non-finite word that is then refused as not finite
    1 <= data rows <= the n setting's maximum
    the targets y: the columns a header names as targets (``y``, ``target``, alone or followed
      by a digit, ``_``, ``-``, ``.``, a space or a bracket: ``y1``, ``y_2``, ``target price``;
      any case, anywhere in the row); without such a header, the last d_out columns, or the
      last column alone when d_out leaves no input column; the other columns are x, with
      1 <= columns of x <= the d_in setting's maximum and targets <= the d_out setting's maximum
    with task = classification the last column alone holds the targets, whatever the header
      says: each cell a class, a whole number in [0, d_out) (``data.class_targets``), and y its
      one-hot rows (N, d_out); every other column is x
    the step then runs with N = data rows, D_in = columns of x, D_out = targets (``fit``), and
      the page's controls show those values

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

from playground.core.data.synthetic import class_targets
from playground.core.frozen import freeze
from playground.core.settings.settings import ConfigError, StepConfig, settings, shown

MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class UserData:
    """Parsed data: x (N, D_in) and y (N, D_out) float32, read-only; ``name`` for the page."""

    name: str
    x: np.ndarray
    y: np.ndarray

    def shapes(self) -> dict[str, int]:
        """The settings the data fixes: ``n``, ``d_in`` and ``d_out``."""
        return {"n": self.x.shape[0], "d_in": self.x.shape[1], "d_out": self.y.shape[1]}

    def fit(self, config: StepConfig) -> StepConfig:
        """``config`` with N, D_in and D_out taken from the data."""
        return config.replace(**self.shapes())


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


# A header cell naming a target column: y or target, alone or followed by a separator or digits.
TARGET_NAME = re.compile(r"(?:y|target)(?:[0-9_.\-\[( ].*)?", re.IGNORECASE | re.DOTALL)


def target_columns(header: list[str] | None, width: int, d_out: int) -> list[int]:
    """The columns (from 0) holding the targets, by the module's rule."""
    if header is not None:
        named = [c for c, cell in enumerate(header) if TARGET_NAME.fullmatch(cell.strip())]
        if named:
            return named
    return list(range(width - d_out if d_out < width else width - 1, width))


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


def parse_csv(
    content: bytes, d_out: int, name: str = "data.csv", task: str = "regression"
) -> UserData:
    """The UserData of a CSV file's bytes for ``task`` (see the module rule); ConfigError
    naming the cell."""
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
        raise _refuse(
            f"the file has {len(data):,} data rows; at most {max_rows:,} (the cap on "
            f"{table['n'].label})"
        )
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
    header = rows[0] if first_data else None
    classes = task == "classification"
    targets = [width - 1] if classes else target_columns(header, width, d_out)
    inputs = [c for c in range(width) if c not in targets]
    max_in, max_out = int(table["d_in"].high), int(table["d_out"].high)
    if classes and not inputs:
        raise _refuse(
            "for classification the last column holds the class and the others the inputs; the "
            "file has one column"
        )
    if not inputs:
        raise _refuse(
            f"every one of its {width} columns is headed as a target (y..., target...); at "
            "least one must be an input"
        )
    if len(inputs) > max_in:
        raise _refuse(
            f"{len(inputs)} input columns; at most {max_in} (the cap on {table['d_in'].label})"
        )
    if len(targets) > max_out:
        raise _refuse(
            f"{len(targets)} target columns; at most {max_out} (the cap on {table['d_out'].label})"
        )
    matrix = values.astype(np.float32)
    y = matrix[:, targets].copy()
    if classes:
        y = class_targets(values[:, -1], d_out, first_row=first_data + 1, column_number=width)
    return UserData(name=name, x=freeze(matrix[:, inputs].copy()), y=freeze(y))
