"""Downloadable files: the step's entries, the sweep, the dynamics and the JSON summaries.

Each ``*_csv``/``*_json`` function writes one file and returns its path, for a Gradio
``gr.File`` or ``gr.DownloadButton`` output. Rule::

    where   one temporary directory of this module (created on first use, under the system
            temporary directory, which Gradio serves from); every file gets its own
            subdirectory, so two requests never write the same path, and a name that says
            what it holds and the settings, such as
            gradients_bfloat16_linear_sgd_n256_64x16_lr0.1_S1024_seed0_data0.csv
    cleanup whenever a file is written: files older than MAX_AGE_SECONDS are deleted, then the
            oldest until at most MAX_FILES files and MAX_BYTES bytes remain (the new file and
            files still being written are kept); the directory is removed at interpreter exit
    size    the gradients file has one row per parameter entry; more than MAX_GRADIENT_ROWS rows
            (about 107 bytes each) are refused with a ValueError that names the size. The bound
            admits the largest model of the default caps (1024 x 1024 kernel + 1024 bias: a
            112 MB file, written in about 3 s of CPU on a 2-vCPU machine) and no more

CSV format: comma-separated, a header row, ``\\n`` line ends, UTF-8, quoted only where a field
holds a comma (``csv`` module's QUOTE_MINIMAL; no comment lines). A float32 value is written as
the shortest decimal (at most 9 significant digits) that parses back to exactly that float32
with any correctly rounded parser, through float64 or not (Python's ``float``, numpy, pandas):
positional in [1e-4, 1e9) with a ``.`` (``0.1``, ``100.0``, ``-0.0``), scientific outside it
(``1e-05``, ``3.4028235e+38``), and ``inf``, ``-inf``, ``nan`` (``float32_text`` shows it).
Flags are ``1``/``0``. Formatting is vectorised numpy, chunk by chunk: about twice as fast as
Python's ``"%.9g" % value`` row by row, and with shorter numbers.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from playground.core.report import StepReport
from playground.core.sweep import SweepReport
from playground.core.train import DynamicsReport

MAX_AGE_SECONDS = 30 * 60
MAX_FILES = 200
MAX_BYTES = 2**30
# The largest linear model of the default caps, 1024 x 1024 + 1024 entries, fits.
MAX_GRADIENT_ROWS = 2**20 + 2**10

GRADIENT_COLUMNS = {
    "before": "before",
    "scaled_gradient": "scaled_grads",
    "unscaled_gradient": "mixed_grads",
    "float32_gradient": "float32_grads",
    "update": "updates",
    "mixed_after": "mixed_after",
    "float32_after": "float32_after",
}
SWEEP_COLUMNS = (
    "log2_scale",
    "scale",
    "rel_error",
    "underflow_share",
    "nonfinite_share",
    "new_loss",
    "safe",
)
DYNAMICS_LOSSES = ("float32_loss", "mixed_loss", "pure_loss")
DYNAMICS_PER_STEP = (
    "mixed_scale",
    "mixed_skipped",
    "mixed_lost_share",
    "pure_scale",
    "pure_skipped",
    "pure_lost_share",
    "mixed_saturated_share",
    "pure_saturated_share",
)

# --- the directory -------------------------------------------------------------------------

_lock = threading.Lock()
_root: str | None = None
_writing: set[str] = set()


def download_dir() -> str:
    """This module's temporary directory, created on first use and removed at exit."""
    global _root
    with _lock:
        if _root is None or not os.path.isdir(_root):
            _root = tempfile.mkdtemp(prefix="playground-downloads-")
            atexit.register(shutil.rmtree, _root, ignore_errors=True)
        return _root


def _entries(root: str) -> list[tuple[float, int, str]]:
    """(mtime, bytes, subdirectory) of every kept file, oldest first.

    An empty subdirectory counts with its own mtime: a writer that has just made it, or one
    that failed; it expires like a file.
    """
    entries = []
    for name in os.listdir(root):
        folder = os.path.join(root, name)
        try:
            files = [os.path.join(folder, f) for f in os.listdir(folder)]
            stats = [os.stat(f) for f in files] or [os.stat(folder)]
        except OSError:  # removed meanwhile, or not a directory of ours
            continue
        entries.append((max(s.st_mtime for s in stats), sum(s.st_size for s in stats), folder))
    return sorted(entries)


def cleanup(keep: str | None = None) -> None:
    """Delete expired files, then the oldest past MAX_FILES or MAX_BYTES (see the module rule).

    ``keep`` (a file path) and the files still being written are never deleted.
    """
    root = download_dir()
    with _lock:
        protected = {os.path.dirname(path) for path in _writing | ({keep} if keep else set())}
        entries = _entries(root)
        now = time.time()
        count, size = len(entries), sum(entry[1] for entry in entries)
        for mtime, nbytes, folder in entries:
            expired = now - mtime > MAX_AGE_SECONDS
            if folder in protected or not (expired or count > MAX_FILES or size > MAX_BYTES):
                continue
            shutil.rmtree(folder, ignore_errors=True)
            count, size = count - 1, size - nbytes


def _write(filename: str, write: Callable[[Any], None]) -> str:
    """Write a new file ``filename`` with ``write(binary file)``, clean up, return its path."""
    root = download_dir()
    with _lock:  # made and marked at once: no cleanup sees it unprotected
        folder = tempfile.mkdtemp(dir=root)
        path = os.path.join(folder, filename)
        _writing.add(path)
    try:
        with open(path, "wb") as file:
            write(file)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        with _lock:
            _writing.discard(path)
    cleanup(keep=path)
    return path


# --- file names ----------------------------------------------------------------------------


def _name_part(text: str) -> str:
    """``text`` reduced to letters, digits, ``.``, ``_`` and ``-``; ValueError if none remain."""
    part = re.sub(r"[^A-Za-z0-9._-]+", "-", str(text)).strip("-.")
    if not part:
        raise ValueError(f"a download name needs a letter or digit; got {text!r}")
    return part


def _number(value: Any) -> str:
    """A setting in a file name: 1024, 0.1, 8.50706e37."""
    value = float(value)
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:g}".replace("+", "")


def settings_tag(config: Mapping[str, Any], *, scale: bool = True, run: bool = False) -> str:
    """The settings part of a file name, from a ``StepConfig.to_dict()``.

    ``bfloat16_linear_sgd_n256_64x16_lr0.1_S1024_seed0_data0``: compute dtype, model (an MLP
    as ``mlp2x64-relu``: hidden layers x width, activation), optimizer, N, D_in x D_out,
    learning rate, loss scale, model and data seeds. ``scale=False`` leaves out S (the sweep
    sets its own), ``run=True`` adds the dynamics run (``static_200steps``, ``period100``
    when dynamic, ``pure-kahan`` or ``pure-stochastic`` when the pure run does not round to
    nearest). The data scales are left out (the JSON summary holds every setting).
    Raises KeyError for a missing setting (model and optimizer default to linear and sgd).
    """
    c = config
    model = c.get("model", "linear")
    if model == "mlp":
        model = f"mlp{c['hidden_layers']}x{c['hidden_width']}-{c['activation']}"
    parts = [c["compute_dtype"], model, c.get("optimizer", "sgd")]
    parts += [f"n{c['n']}", f"{c['d_in']}x{c['d_out']}", f"lr{_number(c['lr'])}"]
    if scale:
        parts.append(f"S{_number(c['loss_scale'])}")
    if run:
        parts += [c["mode"], f"{c['steps']}steps"]
        parts += [f"period{c['period']}"] if c["mode"] == "dynamic" else []
        rounding = c.get("pure_rounding", "nearest")
        parts += [f"pure-{rounding}"] if rounding != "nearest" else []
    parts += [f"seed{c['model_seed']}", f"data{c['data_seed']}"]
    return "_".join(_name_part(part) for part in parts)


# --- vectorised text -----------------------------------------------------------------------
# A chunk of rows is one (rows, width) uint8 buffer: every field has fixed columns in it and
# writes its ASCII characters there, leaving NUL bytes where it has none (a float's unused
# digits, say); the file gets the buffer's bytes with the NULs dropped (np.compress, the
# fastest numpy way). Nothing is formatted one value at a time in Python.

_OFFSET = 64  # _TEN[k + _OFFSET] = 10.0**k; float32 digits need k in [-54, 38]
_TEN = 10.0 ** np.arange(-_OFFSET, _OFFSET, dtype=np.float64)


def _shortest_digits(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(digits m, count p, exponent e): m * 10^(e - p + 1) is the shortest decimal for ``x``.

    ``x``: finite positive float32 values. For each p = 1 .. 9, the nearest p-digit decimal is
    accepted when it lies inside the interval of reals that round to x in float32 by a margin
    of 2^-20 of the interval's width; the least accepted p wins. The test runs on the values
    scaled to nine digits before the point, in float64: each operation errs by 2^-53 of the
    value, at most 2^-29 of the interval's width (2^-24 of the value at the least), far inside
    the margin, so the true decimal lies inside the interval too and parses back to x,
    through float64 or directly. Nine digits always do: they err by at most 5e-9 of the
    value, a sixth of the half-width. An integer decimal exactly on the interval's edge
    (values in [2^24, 2^53)) is accepted too when x is even, which round-half-to-even picks.
    The result matches numpy's shortest repr but for edge cases (then one digit longer).
    """
    value = x.astype(np.float64)
    with np.errstate(over="ignore"):
        up = np.nextafter(x, np.float32(np.inf)).astype(np.float64)
    down = np.nextafter(x, np.float32(0)).astype(np.float64)
    up = np.where(np.isinf(up), 2 * value - down, up)  # past the largest float32, as if finite
    low, high = (value + down) / 2, (value + up) / 2
    margin = (high - low) * 2.0**-20
    exponent = np.floor(np.log10(value)).astype(np.int64)
    exponent -= _TEN[exponent + _OFFSET] > value
    exponent += _TEN[exponent + 1 + _OFFSET] <= value
    scale = _TEN[8 - exponent + _OFFSET]  # value * scale is in [1e8, 1e9]
    nine, inner_low, inner_high = value * scale, (low + margin) * scale, (high - margin) * scale
    count = np.full(x.shape, 9, np.int64)
    for p in range(8, 0, -1):  # downwards, so the least accepted p is written last
        unit = 10.0 ** (9 - p)
        decimal = np.rint(nine / unit) * unit
        count[(inner_low < decimal) & (decimal < inner_high)] = p
    edge = np.flatnonzero((value >= 2.0**24) & (value < 2.0**53) & (x.view(np.uint32) % 2 == 0))
    for p in range(8, 0, -1) if edge.size else ():
        unit = _TEN[exponent[edge] - p + 1 + _OFFSET]  # >= 1 where the decimal is an integer
        decimal = np.rint(value[edge] / unit) * unit
        exact = (unit >= 1) & (decimal < 2.0**53)  # an integer that float64 holds
        on_edge = exact & ((decimal == low[edge]) | (decimal == high[edge]))
        count[edge[on_edge & (p < count[edge])]] = p
    digits = np.rint(nine / _TEN[9 - count + _OFFSET]).astype(np.int64)
    carry = digits == 10**count  # rounded up to 10^p: 1 and zeros, one place higher
    digits[carry] //= 10
    return digits, count, exponent + carry


FLOAT_WIDTH = 29
# The float field's columns: sign, the "0.000" of 0.000ddd, nine digits each followed by a
# place for the point, the "0" of "100.0", and the exponent "e-05".
_SIGN, _PREFIX, _DIGIT, _POINT, _TAIL, _EXP = 0, 1, slice(6, 24, 2), slice(7, 24, 2), 24, 25
_NINE = np.arange(9)[:, None]
_ZERO, _DOT, _MINUS, _PLUS, _E = (np.uint8(ord(c)) for c in "0.-+e")


def _fill_float32(x: np.ndarray, out: np.ndarray) -> None:
    """Write float32 ``x`` into ``out`` (len(x), FLOAT_WIDTH), as the module docstring says.

    Positional (``0.1``, ``100.0``) for decimal exponents in [-4, 9), scientific (``1e-05``)
    outside; ``-0.0``, ``inf``, ``-inf``, ``nan``. The field is built column by column in a
    transposed buffer, where each column is contiguous, and copied into ``out`` at once.
    """
    special = ~np.isfinite(x) | (x == 0)
    m, p, e = _shortest_digits(np.where(special, np.float32(1), np.abs(x)))
    text = np.zeros((FLOAT_WIDTH, x.size), np.uint8)
    left = (m * 10 ** (9 - p)).astype(np.uint32)  # nine digits, the first p significant
    digits = text[_DIGIT]
    for place in range(8, -1, -1):  # uint32 by a scalar: numpy's fastest integer division
        quotient = left // np.uint32(10)
        digits[place] = left - quotient * np.uint32(10) + _ZERO
        left = quotient
    positional = (e >= -4) & (e < 9)
    whole, fraction, scientific = positional & (e >= 0), positional & (e < 0), ~positional
    text[_SIGN] = (np.signbit(x) & ~np.isnan(x)) * _MINUS
    text[_PREFIX] = fraction * _ZERO
    text[_PREFIX + 1] = fraction * _DOT
    for zero in range(3):  # the zeros between "0." and the digits
        text[_PREFIX + 2 + zero] = (fraction & (e < -1 - zero)) * _ZERO
    # Digits past the p-th are zeros; shown only where they hold the place of units.
    digits *= (p > _NINE) | (whole & (e >= _NINE))
    text[_POINT] = ((whole & (e == _NINE)) | (scientific & (_NINE == 0) & (p > 1))) * _DOT
    text[_TAIL] = (whole & (p <= e + 1)) * _ZERO
    power = np.abs(e).astype(np.uint8)
    text[_EXP] = scientific * _E
    text[_EXP + 1] = scientific * np.where(e < 0, _MINUS, _PLUS)
    text[_EXP + 2] = scientific * (power // 10 + _ZERO)
    text[_EXP + 3] = scientific * (power % 10 + _ZERO)
    if special.any():
        text[:, special] = 0
        text[_SIGN, special] = (np.signbit(x) & ~np.isnan(x))[special] * _MINUS
        for word, where in ((b"nan", np.isnan(x)), (b"inf", np.isinf(x)), (b"0.0", x == 0)):
            text[1:4, where] = np.frombuffer(word, np.uint8)[:, None]
    out[:] = text.T


def float32_text(values: np.ndarray) -> list[str]:
    """The text the CSV files write for float32 ``values`` (flattened), one string each."""
    x = np.asarray(values, np.float32).ravel()
    out = np.zeros((x.size, FLOAT_WIDTH), np.uint8)
    _fill_float32(x, out)
    return [bytes(row[row != 0]).decode() for row in out]


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
class _Column:
    """A CSV column: its width in the row buffer and ``fill(rows, out)`` for a chunk."""

    width: int
    fill: Callable[[slice, np.ndarray], None]


def _float_column(values: np.ndarray, present: np.ndarray | None = None) -> _Column:
    """A float column; where ``present`` is False the field is left empty.

    float32 values are formatted by ``_fill_float32``; other floats (none in the reports) by
    ``repr``, which round-trips a float64.
    """
    values = np.asarray(values).ravel()
    if values.dtype == np.float32:

        def fill(rows: slice, out: np.ndarray) -> None:
            _fill_float32(values[rows], out)
            if present is not None:
                out[~present[rows]] = 0

        return _Column(FLOAT_WIDTH, fill)
    text = np.array([repr(float(v)).encode() for v in values])
    if present is not None:
        text[~present] = b""
    return _text_column(text)


def _text_column(text: np.ndarray) -> _Column:
    """A column of per-row bytes (an ``S`` array, written as they are)."""
    table = text.view(np.uint8).reshape(text.size, text.itemsize)

    def fill(rows: slice, out: np.ndarray) -> None:
        out[:] = table[rows]

    return _Column(text.itemsize, fill)


def _constant_column(text: bytes) -> _Column:
    def fill(rows: slice, out: np.ndarray) -> None:
        out[:] = np.frombuffer(text, np.uint8)

    return _Column(len(text), fill)


def _flag_column(values: np.ndarray, present: np.ndarray | None = None) -> _Column:
    """1 or 0; empty where ``present`` is False."""
    values = np.asarray(values, bool).ravel()

    def fill(rows: slice, out: np.ndarray) -> None:
        text = np.where(values[rows], ord("1"), ord("0"))
        out[:, 0] = text if present is None else np.where(present[rows], text, 0)

    return _Column(1, fill)


def _int_column(values: np.ndarray) -> _Column:
    values = np.asarray(values, np.int64).ravel()
    return _Column(_int_width(values), lambda rows, out: _fill_int(values[rows], out))


def _index_column(shape: tuple[int, ...]) -> _Column:
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

    return _Column(sum(widths) + max(len(shape) - 1, 0) + 2 * quoted, fill)


CHUNK_ROWS = 2**14  # rows formatted at once: a few MB of buffers, which stay in cache


def _write_rows(file: Any, columns: Sequence[_Column], rows: int) -> None:
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


def _csv(filename: str, header: Sequence[str], blocks: Sequence[tuple[int, list[_Column]]]) -> str:
    """Write a CSV of ``header`` and blocks of (rows, columns); return its path."""

    def write(file: Any) -> None:
        file.write((",".join(header) + "\n").encode())
        for rows, columns in blocks:
            _write_rows(file, columns, rows)

    return _write(filename, write)


# --- the files -----------------------------------------------------------------------------


def gradients_csv(report: StepReport) -> str:
    """Every parameter entry of a step report, one row each; returns the file's path.

    Columns: ``parameter`` (path name), ``index`` (see below), ``before``, ``scaled_gradient``
    (the compute dtype's gradient of S x loss), ``unscaled_gradient`` (that divided by S in
    float32: what the mixed step's optimizer got), ``float32_gradient`` (the float32 twin's),
    ``update`` (what the mixed step's optimizer added), ``mixed_after``, ``float32_after``: the
    ParamReport arrays, exact float32 values.

    Rows come parameter by parameter in the report's order, each in C order. ``index`` is the
    entry's position in its parameter's array, the indices joined by commas: ``"3,1"`` is
    ``kernel[3, 1]`` (input feature 3, output 1), quoted as CSV requires; ``2`` is ``bias[2]``;
    the field is empty for a 0-d parameter.

    Raises:
      ValueError naming the size when the report has more than MAX_GRADIENT_ROWS entries.
    """
    rows = sum(param.size for param in report.params.values())
    if rows > MAX_GRADIENT_ROWS:
        raise ValueError(
            f"The gradients download has one row per parameter entry: this model has "
            f"{rows:,} entries (a file of about {rows * 107 / 1e6:,.0f} MB), more than the "
            f"{MAX_GRADIENT_ROWS:,} allowed. A smaller model fits (smaller D_in x D_out, or "
            "fewer or narrower hidden layers)."
        )
    blocks = []
    for name, param in report.params.items():
        columns = [_constant_column(_text_field(name)), _index_column(param.before.shape)]
        columns += [_float_column(getattr(param, field)) for field in GRADIENT_COLUMNS.values()]
        blocks.append((param.size, columns))
    filename = f"gradients_{settings_tag(report.config.to_dict())}.csv"
    return _csv(filename, ["parameter", "index", *GRADIENT_COLUMNS], blocks)


def sweep_csv(sweep: SweepReport) -> str:
    """The loss-scale sweep, one row per log2 scale; returns the file's path.

    Columns: ``log2_scale`` (integer k), ``scale`` (2^k as the float32 the sweep used),
    ``rel_error``, ``underflow_share``, ``nonfinite_share``, ``new_loss`` (the SweepReport
    curves at that scale) and ``safe`` (1 inside the safe window, else 0).
    """
    exponents = np.asarray(sweep.exponents)
    columns = [
        _int_column(exponents),
        _float_column(np.exp2(exponents).astype(np.float32)),
        *(_float_column(getattr(sweep, name)) for name in SWEEP_COLUMNS[2:-1]),
        _flag_column(sweep.safe),
    ]
    filename = f"sweep_{settings_tag(sweep.config.to_dict(), scale=False)}.csv"
    return _csv(filename, SWEEP_COLUMNS, [(exponents.size, columns)])


def dynamics_csv(dynamics: DynamicsReport) -> str:
    """The three training runs, one row per step 0 .. K; returns the file's path.

    Row k holds the state after k updates: ``step`` = k and the three runs' losses
    (``float32_loss``, ``mixed_loss``, ``pure_loss``, entry k of the report's curves). Rows
    k >= 1 also hold the update that produced that state, the report's entry k - 1 of the
    per-step arrays: ``mixed_scale``, ``mixed_skipped``, ``mixed_lost_share``, ``pure_scale``,
    ``pure_skipped``, ``pure_lost_share``, ``mixed_saturated_share``, ``pure_saturated_share``
    (skipped as 1/0; the saturated shares are 0 but under float8). Those fields are empty in
    row 0, which no update produced.
    """
    steps = dynamics.steps
    present = np.arange(steps + 1) > 0
    columns = [_int_column(np.arange(steps + 1))]
    columns += [_float_column(getattr(dynamics, name)) for name in DYNAMICS_LOSSES]
    for name in DYNAMICS_PER_STEP:
        values = np.asarray(getattr(dynamics, name))
        shifted = np.concatenate([values[:1], values])  # row k <- entry k - 1; row 0 is empty
        make = _flag_column if name.endswith("_skipped") else _float_column
        columns.append(make(shifted, present))
    filename = f"dynamics_{settings_tag(dynamics.config.to_dict(), run=True)}.csv"
    return _csv(filename, ["step", *DYNAMICS_LOSSES, *DYNAMICS_PER_STEP], [(steps + 1, columns)])


def text_file(text: str, filename: str) -> str:
    """Any text (a script, say) as a download named ``filename``; returns the file's path.

    The name is reduced to letters, digits, ``.``, ``_`` and ``-``; UTF-8.
    """
    return _write(_name_part(filename), lambda file: file.write(text.encode()))


def summary_json(summary: Mapping[str, Any], name: str) -> str:
    """A JSON summary (``summarize``, ``sweep_summary``, ``dynamics_summary``) as a file.

    The file is ``{name}_{settings}.json``, e.g. ``summary_bfloat16_linear_..._data0.json``, the
    settings read from ``summary["config"]`` as ``settings_tag`` writes them (S left out for a
    sweep summary, the run added for a dynamics summary; none without a complete config). Its
    text is strict JSON, indented by 2: a NaN or infinity in ``summary`` raises ValueError
    (the summaries write them as "nan", "inf", "-inf"), before any file is made.
    """
    text = json.dumps(summary, allow_nan=False, indent=2) + "\n"
    filename = _name_part(name)
    config = summary.get("config")
    if isinstance(config, Mapping):
        sweep, run = "log2_scales" in summary, "steps" in summary and "mode" in summary
        with contextlib.suppress(KeyError, ValueError):  # not a StepConfig: the name alone
            filename += "_" + settings_tag(config, scale=not sweep, run=run)
    return _write(filename + ".json", lambda file: file.write(text.encode()))
