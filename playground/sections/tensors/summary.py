"""A user's tensors as JSON, as a table and as sentences computed from the counts.

Rule: ``tensors_summary(report)`` is the ``/tensors`` endpoint's JSON::

    file                    the file's name
    formats, recipes        the value formats (plain casts) and the training recipes analysed
    sampled                 whether any tensor was analysed on a sample of its values
    keep_high_precision     the tensors AutoswitchGemm's rule keeps in high precision
    command                 the one command that reads a whole checkpoint the same way
    tensors[]               one row per tensor, in the file's order (``tensor_row``):
      name, shape, dtype    as stored
      analysed, sampled, analysed_values, magnitude
      nonfinite             {nan, posinf, neginf}: counted over every value
      formats[format]       zero, subnormal, overflow, saturated, rel_error, loss_scale_window
      recipes[recipe]       underflow, overflow, rel_error, mse, scale_min, scale_max: the
                            statistics and names of ``python -m playground inspect``
      keep_high_precision   AutoswitchGemm's rule for this tensor
    reading                 the file's sentences

Shares are of the analysed values (a format's: of its finite nonzero entries; a recipe's: of
its finite entries); a window is {low_log2, high_log2} or null; a share or error with nothing to
count is null (strict JSON). The sentences name a tensor as the file does, in code quotes (a
backtick escaped), and quote only counted numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from playground.core.formats.dtypes import dtype_facts
from playground.core.tensors.formats import VALUE_FORMATS, Shares
from playground.core.tensors.inspection import MSE_THRESHOLD, UNDERFLOW_THRESHOLD
from playground.core.tensors.recipe_stats import RECIPES, STORES
from playground.core.tensors.report import TensorReport, TensorsReport

# The command that reads a whole checkpoint (shards, a hub folder) the way this tab reads a file.
COMMAND = "python -m playground inspect PATH --json stats.json --html report.html"
NONFINITE_WORDS = {"nan": "NaN", "posinf": "+inf", "neginf": "-inf"}


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
        "sampled": tensor.sampled,
        "analysed_values": tensor.analysed_values,
        "nonfinite": tensor.nonfinite or dict.fromkeys(NONFINITE_WORDS, 0),
        "keep_high_precision": tensor.keep_high_precision,
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
    row["recipes"] = tensor.recipe_rows()
    return row


def tensors_summary(report: TensorsReport) -> dict[str, Any]:
    """The endpoint's JSON (see the module rule)."""
    return {
        "file": report.file_name,
        "formats": list(VALUE_FORMATS),
        "recipes": list(RECIPES),
        "sampled": report.sampled,
        "keep_high_precision": report.keep_high_precision,
        "command": COMMAND,
        "tensors": [tensor_row(tensor) for tensor in report.tensors],
        "reading": file_sentences(report),
    }


def _scales(window: tuple[int, int] | None) -> str:
    if window is None:
        return "no power-of-two loss scale keeps both its smallest and its largest entry"
    return f"S = 2^{window[0]} to 2^{window[1]} keeps them"


def nonfinite_words(counts: dict[str, int]) -> str:
    """'1 NaN, 3 +inf and 1 -inf' for the kinds counted; '' when there are none."""
    parts = [
        f"{counts[kind]:,} {word}" for kind, word in NONFINITE_WORDS.items() if counts.get(kind)
    ]
    if len(parts) <= 1:
        return "".join(parts)
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _recipe_sentence(name: str, stats: dict[str, float | None]) -> str:
    lost = [
        f"{percent(value)} {what}"
        for value, what in ((stats["underflow"], "stored as 0"), (stats["overflow"], "saturated"))
        if value
    ]
    kept = " and ".join(lost) if lost else "nothing stored as 0 or saturated"
    error = "" if stats["rel_error"] is None else f", {stats['rel_error']:.2g} error in norm"
    return f"{name} ({STORES[name]}): {kept}{error}."


def tensor_sentences(tensor: TensorReport) -> list[str]:
    """What each training recipe, then each plain cast, does to ``tensor``, from its counts."""
    name, summary = code(tensor.name), tensor.magnitudes
    if summary is None:
        return [f"{name} holds {tensor.dtype} values, not floating point: not analysed."]
    sentences = []
    total = math.prod(tensor.shape)
    if tensor.sampled:
        sentences.append(
            f"{name} has {total:,} values; these figures are of a sample of "
            f"{tensor.analysed_values:,} (whole rows of its matmul view at an even stride; "
            f"every value: `{COMMAND}`)."
        )
    bad = nonfinite_words(tensor.nonfinite)
    if bad:
        sentences.append(
            f"{name} holds {bad} (of {total:,} values): they are left out of every share and "
            "error below, and a training step whose gradients hold them is skipped "
            "(GradScaler) or poisons the weights."
        )
    if summary.nonzero == 0:
        return sentences + [f"{name} has no finite nonzero entry: every format keeps it as it is."]
    for recipe, stats in tensor.recipe_rows().items():
        sentences.append(_recipe_sentence(recipe, stats))
    if tensor.keep_high_precision:
        sentences.append(
            f"AutoswitchGemm's rule keeps {name} in high precision: an FP8 or FP4 recipe stores "
            f"over {UNDERFLOW_THRESHOLD:.0%} of it as 0 or has an MSE over {MSE_THRESHOLD:g}."
        )
    for fmt, shares in tensor.formats.items():
        facts = dtype_facts(fmt)
        unscaled = "" if fmt in RECIPES else " (an unscaled cast; training scales first)"
        if shares.zero:
            sentences.append(
                f"A plain cast to {fmt}{unscaled}: {percent(shares.zero)} of {name}'s nonzero "
                f"entries round to 0 (at or below {facts.smallest_subnormal / 2:.3g}, half its "
                f"smallest subnormal); {_scales(tensor.windows[fmt])}."
            )
        if shares.saturated:
            lost = "become inf or NaN" if shares.overflow else f"clip to {facts.max:g}"
            sentences.append(
                f"A plain cast to {fmt}{unscaled}: {percent(shares.saturated)} of {name}'s "
                f"nonzero entries are past its largest value, {facts.max:g}, and {lost} (a "
                f"saturating cast keeps {facts.max:g}); {_scales(tensor.windows[fmt])}."
            )
    return sentences


def file_sentences(report: TensorsReport) -> list[str]:
    """The file: its tensors, samples, non-finite entries, each recipe's losses to 0, the
    tensors to keep in high precision and the command for a whole checkpoint."""
    analysed = [t for t in report.tensors if t.magnitudes is not None and t.magnitudes.nonzero]
    count, floating = len(report.tensors), len(analysed)
    held = f"{code(report.file_name)} holds {count} tensor{'' if count == 1 else 's'}"
    are = "is" if floating == 1 else "are"
    sentences = [f"{held}; {floating} {are} floating point with nonzero entries."]
    sampled = [t for t in report.tensors if t.sampled]
    if sampled:
        sentences.append(
            f"{len(sampled)} tensor{'' if len(sampled) == 1 else 's'} too large to analyse here "
            f"whole {'was' if len(sampled) == 1 else 'were'} sampled (at most "
            f"{max(t.analysed_values for t in sampled):,} values each; non-finite entries are "
            "still counted over every value)."
        )
    bad = [t for t in report.tensors if nonfinite_words(t.nonfinite)]
    if bad:
        listed = "; ".join(f"{code(t.name)}: {nonfinite_words(t.nonfinite)}" for t in bad[:6])
        more = f"; and {len(bad) - 6} more" if len(bad) > 6 else ""
        sentences.append(f"Non-finite entries: {listed}{more}.")
    underflows = {
        t.name: {name: row["underflow"] for name, row in t.recipe_rows().items()} for t in analysed
    }
    for recipe in RECIPES:
        lost = {t.name: underflows[t.name][recipe] for t in analysed}
        losing = [t for t in analysed if lost[t.name]]
        if losing:
            worst = max(losing, key=lambda t: lost[t.name] or 0.0)
            share = lost[worst.name] or 0.0
            sentences.append(
                f"In {recipe}, {len(losing)} of {floating} lose{'s' if floating == 1 else ''} "
                f"entries to 0; the most, {percent(share)}, {code(worst.name)}."
            )
    kept = report.keep_high_precision
    if kept:
        listed = ", ".join(code(name) for name in kept[:6]) + (", ..." if len(kept) > 6 else "")
        sentences.append(
            f"AutoswitchGemm's rule (underflow over {UNDERFLOW_THRESHOLD:.0%} or MSE over "
            f"{MSE_THRESHOLD:g} in an FP8 or FP4 recipe) keeps {len(kept)} in high precision: "
            f"{listed}."
        )
    sentences.append(
        f"A whole checkpoint (a folder of shards, a hub id), every value: `{COMMAND}`."
    )
    return sentences


TABLE_HEADERS = ["tensor", "non-finite", *RECIPES, "keep high"]
# The first column is Markdown (the name in code quotes, its shape and dtype under it).
TABLE_DATATYPES = ["markdown", "str", *["number"] * len(RECIPES), "str"]
TABLE_NOTE = (
    "Each recipe's column: the share (%) of the tensor's analysed finite entries it stores as 0 "
    "(underflow), as `python -m playground inspect` counts it. Each heading's menu (⋮) sorts "
    "the table by its column."
)


def table(report: TensorsReport) -> tuple[list[str], list[list[Any]]]:
    """(headers, rows) of the per-tensor table: name, and under it how it is stored (shape and
    dtype, and "sampled" when its figures are of a sample); its non-finite entries; then the
    share of its entries (%) that each training recipe stores as 0 (headed by the recipes'
    names: TABLE_NOTE); and whether AutoswitchGemm's rule keeps it in high precision."""
    headers = TABLE_HEADERS
    rows = []
    for tensor in report.tensors:
        stored = f"{'x'.join(map(str, tensor.shape)) or 'scalar'} {tensor.dtype}"
        sampled = ", sampled" if tensor.sampled else ""
        row: list[Any] = [f"{code(tensor.name)}<br>{stored}{sampled}"]
        if tensor.stats is None:
            rows.append(row + [None] * (len(headers) - len(row)))
            continue
        row.append(nonfinite_words(tensor.nonfinite) or "0")
        for stats in tensor.recipe_rows().values():
            underflow = stats["underflow"]
            row.append(None if underflow is None else round(100 * underflow, 3))
        row.append("yes" if tensor.keep_high_precision else "")
        rows.append(row)
    return headers, rows
