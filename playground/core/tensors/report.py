"""A user's tensors analysed: every tensor through every format and every training recipe.

Rule: ``analyse_file(file, size, file_name)`` reads the file (``core.tensors.reading``: checked,
capped, refused by name before its data is read; one tensor at a time, a large one sampled)
and, for each floating-point tensor, records

    magnitudes, formats, windows   its magnitude summary and what a plain cast to each value
                                   format does to it, with the loss scales that keep it in
                                   range (``core.tensors.formats``)
    stats                          each training recipe's statistics as ``python -m playground
                                   inspect`` counts them (``recipe_stats.tensor_stats`` of its
                                   matmul view: scaled FP8, MXFP8, FP8 blocks, NVFP4), with its
                                   non-finite entries by kind (``nonfinite``: counted over
                                   every value, sampled or not)
    analysed, sampled              the values analysed, and whether they are a sample
    keep_high_precision            AutoswitchGemm's rule (``inspection.keeps_high_precision``)

An integer or boolean tensor is listed with its shape and dtype only. The record holds counts
and shares, never the tensors' values.

Example::

    >>> import io, json, struct
    >>> header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})
    >>> data = struct.pack("<Q", len(header)) + header.encode() + struct.pack("<2f", 1.0, 1e-8)
    >>> report = analyse_file(io.BytesIO(data), len(data), "grads.safetensors")
    >>> report.tensors[0].formats["float16"].zero
    0.5
    >>> report.tensors[0].stats.recipes["float8_current"].underflow
    0.5
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import BinaryIO

import numpy as np

from playground.core.tensors.formats import (
    VALUE_FORMATS,
    LiveEntries,
    Magnitudes,
    Shares,
    live_shares,
    magnitudes,
    scale_window,
)
from playground.core.tensors.inspection import keeps_high_precision
from playground.core.tensors.reading import FLOATING, StoredTensor, iter_tensors
from playground.core.tensors.recipe_stats import TensorStats, is_gradient, tensor_stats
from playground.core.tensors.sampling import matmul_view


@dataclass(frozen=True)
class TensorReport:
    """One tensor of the file: as stored (name, safetensors dtype, shape) and, for a
    floating-point one, what the module rule records."""

    name: str
    dtype: str
    shape: tuple[int, ...]
    magnitudes: Magnitudes | None = None
    formats: dict[str, Shares] = field(default_factory=dict)
    windows: dict[str, tuple[int, int] | None] = field(default_factory=dict)
    stats: TensorStats | None = None
    nonfinite: dict[str, int] = field(default_factory=dict)
    analysed_values: int = 0
    sampled: bool = False
    keep_high_precision: bool = False

    @property
    def analysed(self) -> bool:
        """Whether it is a floating-point tensor (the others are listed, not analysed)."""
        return self.dtype in FLOATING

    def recipe_rows(self) -> dict[str, dict[str, float | None]]:
        """Each recipe's statistics as plain dicts (the inspect command's JSON); {} when not
        analysed."""
        if self.stats is None:
            return {}
        return {name: asdict(result) for name, result in self.stats.recipes.items()}


@dataclass(frozen=True)
class TensorsReport:
    """The file's name and its tensors, in the header's order."""

    file_name: str
    tensors: tuple[TensorReport, ...]

    def tensor(self, name: str) -> TensorReport:
        """The tensor called ``name``; KeyError when the file has none."""
        for tensor in self.tensors:
            if tensor.name == name:
                return tensor
        raise KeyError(name)

    @property
    def sampled(self) -> bool:
        """Whether any tensor was analysed on a sample."""
        return any(tensor.sampled for tensor in self.tensors)

    @property
    def keep_high_precision(self) -> list[str]:
        """The tensors AutoswitchGemm's rule keeps in high precision, in the file's order."""
        return [tensor.name for tensor in self.tensors if tensor.keep_high_precision]


def analyse_tensor(tensor: StoredTensor) -> TensorReport:
    """One stored tensor's report (see the module rule)."""
    if tensor.values is None:
        return TensorReport(tensor.name, tensor.dtype, tensor.shape)
    values = tensor.values
    summary, live = magnitudes(values), LiveEntries.of(values)
    matrix = values if tensor.sampled else matmul_view(values)
    stats = tensor_stats(matrix, gradient=is_gradient(tensor.name))
    report = TensorReport(
        tensor.name,
        tensor.dtype,
        tensor.shape,
        magnitudes=summary,
        formats={fmt: live_shares(live, fmt) for fmt in VALUE_FORMATS},
        windows={fmt: scale_window(summary, fmt) for fmt in VALUE_FORMATS},
        stats=stats,
        nonfinite=tensor.nonfinite or stats.nonfinite,
        analysed_values=int(values.size),
        sampled=tensor.sampled,
    )
    return replace(report, keep_high_precision=keeps_high_precision(report.recipe_rows()))


def analyse_tensors(stored: Iterable[StoredTensor]) -> tuple[TensorReport, ...]:
    """Every tensor's report, one tensor at a time."""
    return tuple(analyse_tensor(tensor) for tensor in stored)


def warm_up() -> None:
    """Compile the block recipes' statistics for the commonest files (float32 and bfloat16,
    weights and gradients, a small and a large tensor), so a user's first file does not wait
    for them."""
    ones = np.ones((128, 9 * 128), np.float32)  # nine super-tiles: the longest call
    stored = []
    for dtype, values in (("F32", ones), ("BF16", ones.astype(FLOATING["BF16"]))):
        for name in ("warm-up.weight", "warm-up.grad"):
            stored += [StoredTensor(name, dtype, (2,), values[0, :2])]
            stored += [StoredTensor(name, dtype, values.shape, values)]
    analyse_tensors(stored)


def analyse_file(file: BinaryIO, size: int, file_name: str) -> TensorsReport:
    """The report of a safetensors file of ``size`` bytes (see the module rule)."""
    return TensorsReport(file_name, analyse_tensors(iter_tensors(file, size, file_name)))
