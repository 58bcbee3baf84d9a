"""A user's tensors as JSON, as a table and as sentences computed from the counts.

Rule: ``tensors_summary(report)`` is the ``/tensors`` endpoint's JSON::

    file                    the file's name
    formats, recipes        the names analysed, from the registries
    sampled                 always false: every entry is counted
    tensors[]               one row per tensor, in the file's order (``tensor_row``):
      name, shape, dtype    as stored
      analysed, magnitude
      formats[format]       zero, subnormal, overflow, saturated, rel_error, loss_scale_window
      recipes[recipe]       zero, subnormal, overflow, saturated, rel_error, flushed_inputs
    reading                 the file's sentences

Shares are of the tensor's finite nonzero entries; a window is {low_log2, high_log2} or null;
a share or error with nothing to count is null (strict JSON). The sentences name a tensor as
the file does, in code quotes (a backtick escaped), and quote only counted numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from playground.core.formats.dtypes import dtype_facts
from playground.core.tensors.formats import VALUE_FORMATS, Shares
from playground.core.tensors.report import BLOCK_RECIPES, TensorReport, TensorsReport


def code(name: str) -> str:
    """``name`` in Markdown code quotes, its backticks escaped (as HTML, which code spans
    show as typed) and its line breaks shown as spaces."""
    return "`" + name.replace("`", "&#96;").replace("\n", " ").replace("\r", " ") + "`"


def percent(share: float) -> str:
    """A share as a percentage that never rounds a nonzero share to 0% or a partial one to
    100%."""
    if share == 0 or share == 1:
        return f"{share:.0%}"
    if share < 0.001:
        return "under 0.1%"
    if share > 0.999:
        return "over 99.9%"
    return f"{share:.1%}"


def _shares(shares: Shares) -> dict[str, float | None]:
    return asdict(shares)


def _window(window: tuple[int, int] | None) -> dict[str, int] | None:
    return None if window is None else {"low_log2": window[0], "high_log2": window[1]}


def tensor_row(tensor: TensorReport) -> dict[str, Any]:
    """One tensor's JSON row (see the module rule)."""
    row: dict[str, Any] = {
        "name": tensor.name,
        "shape": list(tensor.shape),
        "dtype": tensor.dtype,
        "analysed": tensor.analysed,
    }
    summary = tensor.magnitudes
    if summary is None:
        return row | {"magnitude": None, "formats": {}, "recipes": {}}
    counts = summary.log2_counts
    row["magnitude"] = {
        "size": summary.size,
        "nonzero": summary.nonzero,
        "zeros": summary.zeros,
        "nonfinite": summary.nonfinite,
        "amax": summary.amax,
        "smallest_nonzero": summary.smallest,
        "log2_low": summary.log2_low if counts.size else None,
        "log2_high": summary.log2_low + int(counts.size) - 1 if counts.size else None,
    }
    row["formats"] = {
        fmt: _shares(shares) | {"loss_scale_window": _window(tensor.windows[fmt])}
        for fmt, shares in tensor.formats.items()
    }
    row["recipes"] = {
        name: _shares(shares) | {"flushed_inputs": tensor.flushed_inputs[name]}
        for name, shares in tensor.recipes.items()
    }
    return row


def tensors_summary(report: TensorsReport) -> dict[str, Any]:
    """The endpoint's JSON (see the module rule)."""
    return {
        "file": report.file_name,
        "formats": list(VALUE_FORMATS),
        "recipes": list(BLOCK_RECIPES),
        "sampled": False,
        "tensors": [tensor_row(tensor) for tensor in report.tensors],
        "reading": file_sentences(report),
    }


def _scales(window: tuple[int, int] | None) -> str:
    if window is None:
        return "no power-of-two loss scale keeps both its smallest and its largest entry"
    return f"S = 2^{window[0]} to 2^{window[1]} keeps them"


def tensor_sentences(tensor: TensorReport) -> list[str]:
    """What each format and recipe does to ``tensor``, from its counts."""
    name, summary = code(tensor.name), tensor.magnitudes
    if summary is None:
        return [f"{name} holds {tensor.dtype} values, not floating point: not analysed."]
    if summary.nonzero == 0:
        return [f"{name} has no finite nonzero entry: every format keeps it as it is."]
    sentences = []
    for fmt, shares in tensor.formats.items():
        facts = dtype_facts(fmt)
        if shares.zero:
            sentences.append(
                f"{percent(shares.zero)} of {name}'s nonzero entries round to 0 in {fmt} (at or "
                f"below {facts.smallest_subnormal / 2:.3g}, half its smallest subnormal); "
                f"{_scales(tensor.windows[fmt])}."
            )
        if shares.saturated:
            lost = "become inf or NaN" if shares.overflow else f"clip to {facts.max:g}"
            sentences.append(
                f"{percent(shares.saturated)} of {name}'s nonzero entries are past {fmt}'s "
                f"largest value, {facts.max:g}, and {lost} (a saturating cast keeps "
                f"{facts.max:g}); {_scales(tensor.windows[fmt])}."
            )
    for recipe, shares in tensor.recipes.items():
        lost = [
            f"{percent(value)} {what}"
            for value, what in ((shares.zero, "stored as 0"), (shares.saturated, "saturated"))
            if value
        ]
        error = "" if shares.rel_error is None else f", {shares.rel_error:.2g} error in norm"
        kept = " and ".join(lost) if lost else "nothing lost to 0 or saturation"
        sentences.append(f"{recipe} (its own block scales): {kept}{error}.")
    return sentences


def file_sentences(report: TensorsReport) -> list[str]:
    """Per format, how many tensors lose entries to 0 and which loses most."""
    analysed = [t for t in report.tensors if t.magnitudes is not None and t.magnitudes.nonzero]
    count, floating = len(report.tensors), len(analysed)
    held = f"{code(report.file_name)} holds {count} tensor{'' if count == 1 else 's'}"
    are = "is" if floating == 1 else "are"
    sentences = [f"{held}; {floating} {are} floating point with nonzero entries."]
    for fmt in VALUE_FORMATS:
        losing = [t for t in analysed if t.formats[fmt].zero]
        if losing:
            worst = max(losing, key=lambda t: t.formats[fmt].zero or 0.0)
            sentences.append(
                f"In {fmt}, {len(losing)} of {floating} lose{'s' if floating == 1 else ''} "
                "entries to 0; the most, "
                f"{percent(worst.formats[fmt].zero or 0.0)}, {code(worst.name)}."
            )
    return sentences


TABLE_NOTE = (
    "Each format's and recipe's column: the share (%) of the tensor's nonzero entries it stores "
    "as 0. Each heading's menu (⋮) sorts the table by its column."
)


def table(report: TensorsReport) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows) of the per-tensor table: name, dtype, shape, the largest and smallest
    nonzero magnitude as log2, then the share of its nonzero entries (%) that each format's
    cast, then each recipe's quantization, stores as 0 (headed by their names: TABLE_NOTE)."""
    headers = ["tensor", "dtype", "shape", "log2 max", "log2 min", *VALUE_FORMATS, *BLOCK_RECIPES]
    rows = []
    for tensor in report.tensors:
        summary = tensor.magnitudes
        row: list[Any] = [tensor.name, tensor.dtype, "x".join(map(str, tensor.shape)) or "scalar"]
        if summary is None or summary.amax is None or summary.smallest is None:
            rows.append(row + [None] * (len(headers) - len(row)))
            continue
        row += [round(math.log2(summary.amax), 2), round(math.log2(summary.smallest), 2)]
        for shares in (*tensor.formats.values(), *tensor.recipes.values()):
            row.append(None if shares.zero is None else round(100 * shares.zero, 3))
        rows.append(row)
    return headers, rows
