"""A checkpoint on disk streamed one tensor at a time: a safetensors file, a folder of shards
named by ``model.safetensors.index.json``, a Hugging Face model folder or a hub id.

Rule::

    PATH is a file            -> that safetensors file
    PATH is a folder
        with model.safetensors.index.json -> its "weight_map" (tensor name -> shard file)
        with snapshots/ (the hub cache's models--ORG--NAME) -> the snapshot refs/main names
        with *.safetensors    -> every one, sorted by name
    PATH is ORG/NAME, not a path -> huggingface_hub.snapshot_download(allow_patterns=
                                    ["*.safetensors", "*.json"]) (from HF_HUB_CACHE when
                                    HF_HUB_OFFLINE=1), then as a folder
    anything else              -> CheckpointError (the command line exits with 2)

Each tensor is read on its own with the ``safetensors`` library (``safe_open(path, "np")``:
``get_tensor`` for a whole tensor, ``get_slice`` for a sample); a dtype its numpy backend does
not read (float8; bfloat16 slices) is read from the tensor's own byte range of the file
(the header's ``data_offsets``) through ``numpy.memmap`` and viewed as its ml_dtypes dtype. So
at most one tensor (or one sample of it) is in memory at a time.

A sample of at most ``sample`` values is ``sampling.sample_rows``' groups of rows of the
tensor's matmul view (``sampling.matmul_view``); a single row wider than the budget keeps its
first ``sample`` values.
"""

from __future__ import annotations

import json
import math
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# safetensors' dtype codes -> numpy dtypes of the floating-point tensors inspected.
from playground.core.tensors.reading import FLOATING
from playground.core.tensors.sampling import matmul_shape, matmul_view, sample_rows

INDEX_NAME = "model.safetensors.index.json"
HUB_PATTERNS = ["*.safetensors", "*.json"]
# What safetensors' numpy backend reads itself: whole tensors, and slices.
WHOLE_BY_LIBRARY = {"F64", "F32", "F16", "BF16"}
SLICED_BY_LIBRARY = {"F64", "F32", "F16"}


class CheckpointError(ValueError):
    """A path that is not a checkpoint this command reads; the message says why."""


@dataclass(frozen=True)
class TensorEntry:
    """One tensor of a checkpoint: its name, the file holding it, safetensors dtype, shape."""

    name: str
    file: Path
    dtype: str
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        return math.prod(self.shape)


def _hub_snapshot(folder: Path) -> Path | None:
    """The snapshot a hub cache folder (models--ORG--NAME) points at: refs/main, else its only
    snapshot."""
    snapshots = folder / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = folder / "refs" / "main"
    if ref.is_file() and (snapshots / ref.read_text().strip()).is_dir():
        return snapshots / ref.read_text().strip()
    revisions = sorted(p for p in snapshots.iterdir() if p.is_dir())
    return revisions[0] if len(revisions) == 1 else None


def _download(repo_id: str) -> Path:
    """The local folder of a hub model (downloaded, or found in the cache when offline)."""
    try:
        from huggingface_hub import snapshot_download
    except ImportError as error:  # pragma: no cover - huggingface_hub comes with gradio
        raise CheckpointError(
            f"{repo_id!r} is not a path, and huggingface_hub is missing"
        ) from error
    try:
        return Path(snapshot_download(repo_id, allow_patterns=HUB_PATTERNS))
    except Exception as error:  # noqa: BLE001 - every hub failure is the same refusal
        raise CheckpointError(
            f"{repo_id!r} is not a file or folder, and the hub gave no model of that id "
            f"({type(error).__name__}: {str(error)[:160]})"
        ) from None


def _read_header(file: Path) -> dict:
    """The JSON header of a safetensors file (its 8-byte length, then the header)."""
    try:
        with open(file, "rb") as handle:
            (length,) = struct.unpack("<Q", handle.read(8))
            if length > file.stat().st_size - 8:
                raise ValueError("its header length runs past the end of the file")
            header = json.loads(handle.read(length))
    except (OSError, struct.error, ValueError, UnicodeDecodeError) as error:
        raise CheckpointError(f"{file} is not a safetensors file ({error})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{file} is not a safetensors file (its header is not an object)")
    header.pop("__metadata__", None)
    return header


def _entries_of_file(file: Path, names: list[str] | None = None) -> list[TensorEntry]:
    header = _read_header(file)
    wanted = list(header) if names is None else names
    entries = []
    for name in wanted:
        spec = header.get(name)
        if not isinstance(spec, dict) or {"dtype", "shape", "data_offsets"} - set(spec):
            raise CheckpointError(f"{file} holds no tensor {name!r} (its index says it does)")
        entries.append(TensorEntry(name, file, str(spec["dtype"]), tuple(spec["shape"])))
    return entries


def _entries_of_index(index: Path) -> list[TensorEntry]:
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        if not isinstance(weight_map, dict) or not all(
            isinstance(v, str) for v in weight_map.values()
        ):
            raise TypeError("weight_map must map tensor names to shard file names")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise CheckpointError(f"{index} is not a safetensors index ({error!r})") from None
    by_shard: dict[str, list[str]] = {}
    for name, shard in weight_map.items():
        by_shard.setdefault(shard, []).append(name)
    entries = []
    for shard, names in by_shard.items():
        path = index.parent / shard
        if not path.is_file():
            raise CheckpointError(f"{index} names shard {shard!r}, which is not in {index.parent}")
        entries.extend(_entries_of_file(path, names))
    return entries


def checkpoint_entries(path: str | os.PathLike) -> list[TensorEntry]:
    """Every tensor of the checkpoint at ``path`` (see the module rule), without its data."""
    location = Path(path)
    if not location.exists():
        text = os.fspath(path)
        if text.count("/") == 1 and not text.startswith((".", "/")):
            location = _download(text)
        else:
            raise CheckpointError(f"{text} does not exist")
    if location.is_file():
        return _entries_of_file(location)
    snapshot = _hub_snapshot(location)
    if snapshot is not None:
        location = snapshot
    index = location / INDEX_NAME
    if index.is_file():
        return _entries_of_index(index)
    files = sorted(location.glob("*.safetensors"))
    if not files:
        raise CheckpointError(f"{location} holds no .safetensors file")
    return [entry for file in files for entry in _entries_of_file(file)]


def _memmap(entry: TensorEntry) -> np.ndarray:
    """The tensor's bytes in its file, viewed as its dtype and shape (nothing read yet)."""
    header_length = struct.unpack("<Q", entry.file.open("rb").read(8))[0]
    begin, end = _read_header(entry.file)[entry.name]["data_offsets"]
    raw = np.memmap(entry.file, np.uint8, "r", offset=8 + header_length + begin, shape=end - begin)
    return raw.view(FLOATING[entry.dtype].newbyteorder("<")).reshape(entry.shape)


def read_matrix(entry: TensorEntry, sample: int | None = None) -> np.ndarray:
    """The tensor's values (its stored dtype) as its matmul view, or a sample of at most
    ``sample`` values of it (see the module rule); one tensor in memory."""
    from safetensors import safe_open

    rows, columns = matmul_shape(entry.shape)
    whole = sample is None or entry.size <= sample
    if whole and entry.dtype in WHOLE_BY_LIBRARY:
        with safe_open(entry.file, framework="np") as handle:
            return matmul_view(np.asarray(handle.get_tensor(entry.name), FLOATING[entry.dtype]))
    if whole:
        return matmul_view(np.array(_memmap(entry)))
    ranges = [slice(0, min(sample, columns))] if rows == 1 else sample_rows(rows, columns, sample)
    if entry.dtype in SLICED_BY_LIBRARY:
        with safe_open(entry.file, framework="np") as handle:
            part = handle.get_slice(entry.name)
            return np.concatenate([matmul_view(part[r]) for r in ranges])
    matrix = matmul_view(_memmap(entry))
    if rows == 1:
        return np.array(matrix[:, ranges[0]])
    return np.concatenate([np.array(matrix[r]) for r in ranges])


def iter_matrices(
    entries: list[TensorEntry], sample: int | None = None
) -> Iterator[tuple[TensorEntry, np.ndarray]]:
    """Each floating-point tensor of ``entries`` with its values (``read_matrix``), in order."""
    for entry in entries:
        if entry.dtype in FLOATING:
            yield entry, read_matrix(entry, sample)
