"""A safetensors file read exactly as its format specifies, checked before its data is read.

Rule (the format of Hugging Face's ``safetensors``; nothing is ever unpickled)::

    bytes 0-7       N, the header's length, a little-endian unsigned 64-bit integer
    bytes 8..8+N    the header: a UTF-8 JSON object (trailing spaces allowed), one entry per
                    tensor, name -> {"dtype", "shape", "data_offsets": [begin, end]}, and an
                    optional "__metadata__" object of strings, which is ignored
    the rest        the data buffer: each tensor's bytes, little-endian, C order, at
                    [begin, end) counted from the buffer's start

A file is refused (ConfigError naming ``file``, the file's name and what is wrong) unless:
its size is within TENSOR_FILE_MAX_BYTES; N fits in the file; the header is a JSON object
with no repeated name; every entry has exactly those three keys, a dtype of DTYPES, a shape
of non-negative integers whose element count times the dtype's size is end - begin; the
tensors, ordered by begin, tile the buffer exactly (the first begins at 0, each begins where
the previous ends, the last ends at the buffer's end: no overlap, no gap, not truncated);
the tensors number at most TENSORS_MAX_COUNT and have names of at most TENSOR_NAME_MAX_CHARS
characters. All of this is checked from the size and the header alone, before any tensor's
data is read.

The floating-point tensors (FLOATING: F64, F32, F16, BF16, F8_E4M3, F8_E5M2) are read into
numpy arrays of their own dtype (bfloat16 and float8 from ml_dtypes, bit for bit), one at a
time; integer and boolean tensors are listed with their shape and dtype, and not read. The
work is priced, not refused: the floating-point tensors share a budget of
TENSORS_MAX_ELEMENTS values (``sample_size``: the largest per-tensor sample s with
sum(min(size, s)) within the budget, at most TENSOR_SAMPLE_VALUES), so a tensor of at most s
values is read whole, and a larger one as ``sampling.sample_rows``' rows of its matmul view
(its first s values when it is one row), read from their own byte ranges; a sampled tensor's
non-finite entries are still counted over every value, NONFINITE_CHUNK_BYTES at a time.
"""

from __future__ import annotations

import functools
import json
import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import ml_dtypes
import numpy as np

from playground.core.bounds import ConfigError
from playground.core.caps import (
    TENSOR_FILE_MAX_BYTES,
    TENSOR_NAME_MAX_CHARS,
    TENSOR_SAMPLE_VALUES,
    TENSORS_MAX_COUNT,
    TENSORS_MAX_ELEMENTS,
)
from playground.core.tensors.sampling import matmul_shape, sample_rows

FIELD = "file"
# safetensors' dtype codes -> bytes per element; FLOATING: the numpy dtype each is read as.
DTYPES = {
    "F64": 8,
    "F32": 4,
    "F16": 2,
    "BF16": 2,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I64": 8,
    "U64": 8,
    "I32": 4,
    "U32": 4,
    "I16": 2,
    "U16": 2,
    "I8": 1,
    "U8": 1,
    "BOOL": 1,
}
FLOATING = {
    "F64": np.dtype(np.float64),
    "F32": np.dtype(np.float32),
    "F16": np.dtype(np.float16),
    "BF16": np.dtype(ml_dtypes.bfloat16),
    "F8_E4M3": np.dtype(ml_dtypes.float8_e4m3fn),
    "F8_E5M2": np.dtype(ml_dtypes.float8_e5m2),
}
METADATA = "__metadata__"
ENTRY_KEYS = {"dtype", "shape", "data_offsets"}
LENGTH_BYTES = 8
NONFINITE_CHUNK_BYTES = 4 * 2**20


@dataclass(frozen=True)
class StoredTensor:
    """One tensor as the file stores it: its name, safetensors dtype code and shape, and its
    values: a numpy array of that dtype and shape, or when ``sampled`` a 2-D sample of its
    matmul view (see the module rule); None for an integer or boolean tensor. ``nonfinite``:
    a sampled tensor's NaN, +inf and -inf entries counted over every value (``count_nonfinite``),
    None when the values are the whole tensor."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    values: np.ndarray | None
    sampled: bool = False
    nonfinite: dict[str, int] | None = None


@dataclass(frozen=True)
class _Entry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def _refuse(file_name: str, what: str) -> ConfigError:
    return ConfigError(
        FIELD, f"file {file_name!r} is not a safetensors file this page reads: {what}"
    )


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ValueError(f"the header names {repeated[0]!r} twice")
    return dict(pairs)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _entry(file_name: str, name: str, spec: Any) -> _Entry:
    """One header entry, checked on its own (keys, dtype, shape, offsets, size)."""
    if len(name) > TENSOR_NAME_MAX_CHARS:
        raise _refuse(
            file_name,
            f"a tensor name has {len(name):,} characters; at most {TENSOR_NAME_MAX_CHARS}",
        )
    if not isinstance(spec, dict) or set(spec) != ENTRY_KEYS:
        raise _refuse(
            file_name, f"tensor {name!r}'s entry must hold exactly dtype, shape and data_offsets"
        )
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if dtype not in DTYPES:
        raise _refuse(
            file_name, f"tensor {name!r} has dtype {str(dtype)[:20]!r}; known: {', '.join(DTYPES)}"
        )
    if not isinstance(shape, list) or not all(_is_count(size) for size in shape):
        raise _refuse(file_name, f"tensor {name!r}'s shape must be a list of non-negative integers")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(map(_is_count, offsets))):
        raise _refuse(
            file_name, f"tensor {name!r}'s data_offsets must be two non-negative integers"
        )
    begin, end = offsets
    nbytes = math.prod(shape) * DTYPES[dtype]
    if end - begin != nbytes:
        raise _refuse(
            file_name,
            f"tensor {name!r} of shape {shape} in {dtype} takes {nbytes:,} "
            f"bytes, but its data_offsets [{begin}, {end}] span {end - begin:,}",
        )
    return _Entry(name, dtype, tuple(shape), begin, end)


def read_header(file: BinaryIO, size: int, file_name: str) -> tuple[list[_Entry], int]:
    """The checked entries of the file (see the module rule), in the header's order, and
    where its data buffer starts; reads the length and the header only."""
    if size > TENSOR_FILE_MAX_BYTES:
        raise ConfigError(
            FIELD, f"file {file_name!r} has {size:,} bytes; at most {TENSOR_FILE_MAX_BYTES:,}"
        )
    if size < LENGTH_BYTES:
        raise _refuse(file_name, f"it has {size} bytes, fewer than the 8 of a header's length")
    (length,) = struct.unpack("<Q", file.read(LENGTH_BYTES))
    if length > size - LENGTH_BYTES:
        raise _refuse(
            file_name,
            f"its first 8 bytes give a header of {length:,} bytes, more "
            f"than the {size - LENGTH_BYTES:,} after them (truncated, or another kind "
            "of file)",
        )
    try:
        header = json.loads(file.read(length).decode("utf-8"), object_pairs_hook=_unique_object)
    except UnicodeDecodeError:
        raise _refuse(file_name, "its header is not UTF-8 text") from None
    except ValueError as error:
        raise _refuse(file_name, f"its header is not JSON ({str(error)[:80]})") from None
    if not isinstance(header, dict):
        raise _refuse(file_name, "its header is not a JSON object")
    metadata = header.pop(METADATA, {})
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _refuse(file_name, f"its {METADATA} must be an object of strings")
    if not header:
        raise _refuse(file_name, "it holds no tensors")
    if len(header) > TENSORS_MAX_COUNT:
        raise ConfigError(
            FIELD, f"file {file_name!r} holds {len(header):,} tensors; at most {TENSORS_MAX_COUNT}"
        )
    entries = [_entry(file_name, name, spec) for name, spec in header.items()]
    buffer = size - LENGTH_BYTES - length
    position = 0
    for entry in sorted(entries, key=lambda e: (e.begin, e.end)):
        if entry.begin != position:
            what = "overlaps the tensor before it" if entry.begin < position else "leaves a gap"
            raise _refuse(
                file_name,
                f"tensor {entry.name!r} begins at byte {entry.begin:,} of "
                f"the data and {what} (which ends at {position:,})",
            )
        position = entry.end
    if position > buffer:
        raise _refuse(
            file_name,
            f"it is truncated: its header puts the data's end at byte "
            f"{position:,}, and the file holds {buffer:,} bytes of data",
        )
    if position < buffer:
        raise _refuse(file_name, f"it has {buffer - position:,} bytes after the last tensor's data")
    return entries, LENGTH_BYTES + length


def _values(raw: bytes, dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """Little-endian bytes as the dtype's values: read as unsigned integers of its width in
    little-endian order, then viewed as the dtype (bit for bit on any host)."""
    width = DTYPES[dtype]
    bits = np.frombuffer(raw, np.dtype(f"<u{width}")).astype(np.dtype(f"=u{width}"))
    return bits.view(FLOATING[dtype]).reshape(shape)


def sample_size(sizes: list[int], budget: int = TENSORS_MAX_ELEMENTS) -> int:
    """The per-tensor sample s of tensors of ``sizes`` values: the largest s, at most
    TENSOR_SAMPLE_VALUES, with sum(min(size, s)) <= ``budget`` (see the module rule).

    >>> sample_size([10, 10**9], budget=1000)
    990
    """
    remaining, left = budget, len(sizes)
    for size in sorted(sizes):
        share = remaining // left
        if size > share:
            return max(1, min(share, TENSOR_SAMPLE_VALUES))
        remaining, left = remaining - size, left - 1
    return TENSOR_SAMPLE_VALUES


def _read_exactly(file: BinaryIO, offset: int, nbytes: int, file_name: str, name: str) -> bytes:
    file.seek(offset)
    raw = file.read(nbytes)
    if len(raw) != nbytes:
        raise _refuse(file_name, f"tensor {name!r}'s data is cut short")
    return raw


def _read_values(
    file: BinaryIO, start: int, entry: _Entry, sample: int, file_name: str
) -> tuple[np.ndarray, bool]:
    """(values, sampled): the whole tensor in its shape, or a sample of its matmul view."""
    size, width = math.prod(entry.shape), DTYPES[entry.dtype]
    begin = start + entry.begin
    if size <= sample:
        raw = _read_exactly(file, begin, entry.end - entry.begin, file_name, entry.name)
        return _values(raw, entry.dtype, entry.shape), False
    rows, columns = matmul_shape(entry.shape)
    if rows == 1:
        raw = _read_exactly(file, begin, sample * width, file_name, entry.name)
        return _values(raw, entry.dtype, (1, sample)), True
    parts = []
    for part in sample_rows(rows, columns, sample):
        count = (part.stop - part.start) * columns
        raw = _read_exactly(
            file, begin + part.start * columns * width, count * width, file_name, entry.name
        )
        parts.append(_values(raw, entry.dtype, (part.stop - part.start, columns)))
    return np.concatenate(parts), True


@functools.cache
def _nonfinite_codes(dtype: str) -> dict[str, np.ndarray]:
    """For a dtype of at most 16 bits: which of its bit patterns are NaN, +inf and -inf."""
    width = DTYPES[dtype]
    values = np.arange(1 << (8 * width), dtype=f"<u{width}").view(FLOATING[dtype])
    values = values.astype(np.float32)
    return {"nan": np.isnan(values), "posinf": values == np.inf, "neginf": values == -np.inf}


def count_nonfinite(file: BinaryIO, offset: int, entry: _Entry, file_name: str) -> dict[str, int]:
    """The tensor's NaN, +inf and -inf entries over every value, read a chunk at a time (a
    dtype of at most 16 bits by a histogram of its bit patterns)."""
    counts = {"nan": 0, "posinf": 0, "neginf": 0}
    width = DTYPES[entry.dtype]
    step = NONFINITE_CHUNK_BYTES // width * width
    for begin in range(entry.begin, entry.end, step):
        nbytes = min(step, entry.end - begin)
        raw = _read_exactly(file, offset + begin, nbytes, file_name, entry.name)
        if width <= 2:
            histogram = np.bincount(np.frombuffer(raw, f"<u{width}"), minlength=1 << (8 * width))
            for kind, codes in _nonfinite_codes(entry.dtype).items():
                counts[kind] += int(histogram[codes].sum())
            continue
        chunk = _values(raw, entry.dtype, (nbytes // width,))
        infinite = np.isinf(chunk)
        counts["nan"] += int(np.count_nonzero(np.isnan(chunk)))
        counts["posinf"] += int(np.count_nonzero(infinite & (chunk > 0)))
        counts["neginf"] += int(np.count_nonzero(infinite & (chunk < 0)))
    return counts


def read_tensors(file: BinaryIO, size: int, file_name: str) -> list[StoredTensor]:
    """Every tensor of the file (see the module rule), in the header's order; ConfigError
    naming ``file`` and what is wrong."""
    return list(iter_tensors(file, size, file_name))


def iter_tensors(file: BinaryIO, size: int, file_name: str) -> Iterator[StoredTensor]:
    """``read_tensors``' tensors one at a time: at most one tensor's values (or sample) is
    read at a time, after every check of the header has passed."""
    entries, start = read_header(file, size, file_name)
    sample = sample_size([math.prod(e.shape) for e in entries if e.dtype in FLOATING])
    for entry in entries:
        if entry.dtype not in FLOATING:
            yield StoredTensor(entry.name, entry.dtype, entry.shape, None)
            continue
        values, sampled = _read_values(file, start, entry, sample, file_name)
        nonfinite = count_nonfinite(file, start, entry, file_name) if sampled else None
        yield StoredTensor(entry.name, entry.dtype, entry.shape, values, sampled, nonfinite)


def read_file(path: str | os.PathLike, file_name: str | None = None) -> list[StoredTensor]:
    """The tensors of the safetensors file at ``path`` (named ``file_name`` in errors)."""
    with open(path, "rb") as file:
        return read_tensors(file, os.fstat(file.fileno()).st_size, file_name or os.fspath(path))
