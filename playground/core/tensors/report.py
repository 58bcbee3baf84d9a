"""A user's tensors analysed: every tensor against every format and every block recipe.

Rule: ``analyse_file(file, size, file_name)`` reads the file (``core.tensors.reading``: checked,
capped, refused by name before its data is read) and, for each floating-point tensor, records
its magnitude summary, each value format's shares and loss-scale window
(``core.tensors.formats``) and each block recipe's shares (``core.tensors.blocks``; the recipes
are the recipe registry's entries that have a ``block``). Every entry of every tensor is
analysed: nothing is sampled. An integer or boolean tensor is listed with its shape and dtype
only. The record holds counts and shares, never the tensors' values.

Example::

    >>> import io, json, struct
    >>> header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})
    >>> data = struct.pack("<Q", len(header)) + header.encode() + struct.pack("<2f", 1.0, 1e-8)
    >>> report = analyse_file(io.BytesIO(data), len(data), "grads.safetensors")
    >>> report.tensors[0].formats["float16"].zero
    0.5
    >>> report.tensors[0].windows["float16"]
    (2, 15)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from playground.core.recipes.block_formats import BlockRecipe
from playground.core.recipes.registry import RECIPES
from playground.core.tensors.blocks import block_shares
from playground.core.tensors.formats import (
    VALUE_FORMATS,
    LiveEntries,
    Magnitudes,
    Shares,
    live_shares,
    magnitudes,
    scale_window,
)
from playground.core.tensors.reading import FLOATING, StoredTensor, read_tensors

BLOCK_RECIPES: dict[str, BlockRecipe] = {
    name: entry.block for name, entry in RECIPES.items() if entry.block is not None
}


@dataclass(frozen=True)
class TensorReport:
    """One tensor of the file: as stored (name, safetensors dtype, shape) and, for a
    floating-point one, its magnitudes, each format's shares and loss-scale window (exponents
    of 2, or None) and each block recipe's shares with its ``flushed_inputs``."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    magnitudes: Magnitudes | None = None
    formats: dict[str, Shares] = field(default_factory=dict)
    windows: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    recipes: dict[str, Shares] = field(default_factory=dict)
    flushed_inputs: dict[str, int] = field(default_factory=dict)

    @property
    def analysed(self) -> bool:
        """Whether it is a floating-point tensor (the others are listed, not analysed)."""
        return self.dtype in FLOATING


@dataclass(frozen=True)
class TensorsReport:
    """The file's name and its tensors, in the header's order."""

    file_name: str
    tensors: tuple[TensorReport, ...]

    def tensor(self, name: str) -> TensorReport:
        """The tensor called ``name``; KeyError when the file has none."""
        return next(t for t in self.tensors if t.name == name)


def analyse_tensors(stored: list[StoredTensor]) -> tuple[TensorReport, ...]:
    """Every tensor against every format and recipe (see the module rule); the block recipes
    quantize the floating-point tensors together (``core.tensors.blocks``)."""
    floating = [tensor.values for tensor in stored if tensor.values is not None]
    by_recipe = {name: block_shares(floating, spec) for name, spec in BLOCK_RECIPES.items()}
    reports, index = [], 0
    for tensor in stored:
        if tensor.values is None:
            reports.append(TensorReport(tensor.name, tensor.dtype, tensor.shape))
            continue
        summary, live = magnitudes(tensor.values), LiveEntries.of(tensor.values)
        mine = {name: results[index] for name, results in by_recipe.items()}
        index += 1
        reports.append(
            TensorReport(
                tensor.name,
                tensor.dtype,
                tensor.shape,
                magnitudes=summary,
                formats={fmt: live_shares(live, fmt) for fmt in VALUE_FORMATS},
                windows={fmt: scale_window(summary, fmt) for fmt in VALUE_FORMATS},
                recipes={name: shares for name, (shares, _) in mine.items()},
                flushed_inputs={name: flushed for name, (_, flushed) in mine.items()},
            )
        )
    return tuple(reports)


def warm_up() -> None:
    """Compile the block recipes' quantizers (one program each, whatever the shapes) on a
    tiny tensor, so a user's first file does not wait for them."""
    analyse_tensors([StoredTensor("warm-up", "F32", (2,), np.ones(2, np.float32))])


def analyse_file(file: BinaryIO, size: int, file_name: str) -> TensorsReport:
    """The report of a safetensors file of ``size`` bytes (see the module rule)."""
    return TensorsReport(file_name, analyse_tensors(read_tensors(file, size, file_name)))
