"""The precision lab: where the gradients land in the dtype, the loss-scale sweep, the inspector.

Rule: ``step_views(report)`` gives the lab's part of the step event (counters and the magnitude
chart), ``sweep_views(sweep)`` the sweep's outputs (the inspector's are ``inspector_view``'s),
each as plain values (Markdown, JSON, Plotly dicts, file paths). The page (``ui.tabs.lab``)
lays out the components under the same names. Every range quoted in the text is read from the
dtype registry and the sweep's own exponents.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from playground.core.formats.dtypes import (
    BLOCK_ELEMENT_FORMATS,
    BLOCK_SCALE_FORMATS,
    FORMATS,
    dtype_facts,
)
from playground.core.inspector.inspector import PRESETS, bit_view
from playground.core.recipes.registry import COMPUTE_DTYPES, RECIPES, recipe
from playground.core.runs.sweep import SAFE_FACTOR, SweepReport, sweep_exponents
from playground.core.step.report import StepReport
from playground.sections.lab.charts import (
    SCALED_LABEL,
    activation_histogram,
    magnitude_histogram,
    sweep_figure,
)
from playground.sections.lab.notes import magnitude_note, magnitude_scale
from playground.sections.lab.summary import sweep_summary
from playground.views import downloads
from playground.views.numbers import bullets, factor_text

PRECISION_LAB = """
Bars: the scaled gradients the backward pass holds. Outline: the same divided by S, in float32
(a block recipe: float32's at S = 1). Shaded: the format's ranges.
"""
# What the shaded bands mean for a plain format.
PLAIN_BANDS_TEXT = (
    "Left of the subnormal band: rounded to zero; right of the normal band: infinite."
)


def compare_with(report: StepReport) -> str:
    """The sentence that points a plain recipe to the other registered plain format of as many
    bits (float16 <-> bfloat16), only where that helps: this step lost gradient entries to its
    format's range (to zero or past its largest) and the other format's range is wider on that
    side. Else ""."""
    compute = report.config.compute_dtype
    own = recipe(compute).plain_dtype
    if own is None:
        return ""
    scaled = report.magnitudes["after scaling"]
    overflowed, underflowed = scaled["non-finite"] > 0, scaled["lost to zero"] > 0
    for name in COMPUTE_DTYPES:
        other = recipe(name).plain_dtype
        if name == compute or not other or dtype_facts(other).bits != dtype_facts(own).bits:
            continue
        higher = dtype_facts(other).max > dtype_facts(own).max
        lower = dtype_facts(other).smallest_subnormal < dtype_facts(own).smallest_subnormal
        if (overflowed and higher) or (underflowed and lower):
            return f"Try {name}: its range is much wider."
    return ""


def sweep_intro() -> str:
    """The sweep's introduction: the largest scale it runs for every recipe of the registry."""
    ranges = " and ".join(f"2^{sweep_exponents(dtype)[-1]} for {dtype}" for dtype in COMPUTE_DTYPES)
    return f"""
### Loss-scale sweep
Runs the mixed step at every power-of-two loss scale from 2^0 up to {ranges} (just past
each dtype's largest value, and never past what a float32 scale can hold), in one compiled call,
and compares each with float32. Green marks the scales whose gradients are finite and within
{factor_text(SAFE_FACTOR)} the best error the sweep finds.
"""


def _using(role: str, fmt: str) -> str:
    """The first block recipe whose ``role`` (element_format, scale_format) is ``fmt``, as its
    name is written in capitals."""
    return next(
        name.upper()
        for name, entry in RECIPES.items()
        if entry.block is not None and getattr(entry.block, role) == fmt
    )


_E2M1, _E8M0 = (dtype_facts(name) for name in (*BLOCK_ELEMENT_FORMATS, *BLOCK_SCALE_FORMATS))
_ELEMENTS_OF = _using("element_format", _E2M1.name)
_SCALES_OF = _using("scale_format", _E8M0.name)
INSPECTOR_INTRO = f"""
### Precision inspector
Type a number to see how {", ".join(FORMATS)} store it: the sign, exponent and mantissa
bits, the value actually kept, the rounding error and the gap to the next representable value.
Each format rounds the number you type once, from its exact decimal value (to nearest, ties to
even), never through another format. Press any bit in a format's row to flip it: the inspector
then shows that bit pattern (typed as `0x3c01:float16`, the format's bits in hex and its name).
Past a format's largest value the plain cast gives inf, or NaN in float8_e4m3fn, which has no
inf (as ml_dtypes casts); the float8 step's saturating cast keeps the largest value instead.

The last two columns are the block recipes' formats. {_E2M1.name} ({_ELEMENTS_OF}'s elements) \
has no inf
and no NaN: its plain cast clips anything past {_E2M1.max:g} to {_E2M1.max:g} and stores NaN as a
zero. {_E8M0.name} ({_SCALES_OF}'s block scales) holds only the powers of two
2^{math.log2(_E8M0.smallest_normal):.0f} to 2^{math.log2(_E8M0.max):.0f} and NaN, with no sign
and no zero: a tie goes up to the larger power (3 is stored as
{bit_view("3", _E8M0.name).stored:g}), a positive number below the smallest becomes the smallest,
and zero or a negative number is NaN.
"""


ACTIVATION_LABEL = "Activation gradients per hidden layer"
MAGNITUDE_LABEL = "Gradient magnitudes against the dtype's ranges"
TAB_LABEL = "Precision lab"
# The report's charts inside this tab, by output name (the magnitude figure sits above the tabs).
FIGURES = {"activation_plot": activation_histogram}


class LabStepViews(NamedTuple):
    """The lab's outputs of the step event, in the API's order."""

    magnitudes: str
    magnitude_plot: dict[str, Any]
    activation_plot: dict[str, Any]


class SweepViews(NamedTuple):
    """The sweep endpoint's outputs, in the API's order."""

    sweep_reading: str
    sweep_json: dict[str, Any]
    sweep_plot: dict[str, Any]
    sweep_files: list[str] | None


def magnitude_table(report: StepReport) -> str:
    """The counters as a Markdown table of shares: a row per kind (lost to zero, subnormal,
    non-finite), a column per view, named as the magnitude chart names the same gradients.

    The JSON's "after scaling" column is shown as SCALED_LABEL, its "before scaling" column as
    the float32 gradient cast to the dtype without loss scaling; the JSON keys stay, being part
    of the API. A block recipe's table is ``_block_magnitude_table``'s.
    """
    counts = report.magnitudes
    total = counts["entries"]["total"]
    chosen = recipe(report.config.compute_dtype)
    dtype = chosen.gradient_format  # float8: E5M2
    if chosen.block is not None:
        return _block_magnitude_table(report)
    shown_as = {
        "before scaling": f"without loss scaling (float32 gradient cast to {dtype})",
        "after scaling": SCALED_LABEL,
    }
    compute = report.config.compute_dtype
    note = (
        f" ({compute}: {dtype} is the format of the gradient arriving at each matmul's output; "
        f"these parameter gradients are float32 sums of its products, placed on {dtype}'s "
        "ranges)"
        if dtype != compute
        else ""
    )
    compare = compare_with(report)
    return (
        f"Gradient entries in {dtype} ({total:,} in all), "
        f"by where they land{note}:\n\n"
        + _counts_table(counts, shown_as)
        + f"\n\n**What to notice:** {magnitude_note(report)} {PLAIN_BANDS_TEXT} {compare}".rstrip()
        + "\n"
    )


def _counts_table(counts: dict, shown_as: dict[str, str]) -> str:
    """One column per view (named by ``shown_as``), one row per kind, each cell a share of
    every entry and its count; the long view names wrap in the header, so the numbers stay
    readable beside the headline. Every header cell is named (the rows' one too: a screen
    reader announces it with each kind)."""
    total = counts["entries"]["total"]
    views = [when for when in counts if when != "entries"]
    header = (
        "| Gradient entries | "
        + " | ".join(shown_as[when] for when in views)
        + " |\n"
        + "|---" * (len(views) + 1)
        + "|\n"
    )
    rows = [
        f"| {kind} | "
        + " | ".join(f"{counts[when][kind] / total:.1%} ({counts[when][kind]:,})" for when in views)
        + " |"
        for kind in counts[views[0]]
    ]
    return header + "\n".join(rows)


def _block_magnitude_table(report: StepReport) -> str:
    """A block recipe's counts (``core.recipes.block_places``): where its block scales place
    the gradient entries, at S = 1 (float32's gradient) and at this S (the scaled gradient)."""
    spec = recipe(report.config.compute_dtype).block
    name, scale = spec.name, magnitude_scale(report.config.loss_scale)
    counts = report.magnitudes
    shown_as = {
        "before scaling": f"S = 1: float32's gradient stored in {name}'s blocks",
        "after scaling": f"S = {scale}: the scaled gradient stored in {name}'s blocks",
    }
    return (
        f"Gradient entries as {name} stores them ({counts['entries']['total']:,} in all), by "
        "where they land in their blocks:\n\n"
        + _counts_table(counts, shown_as)
        + f"\n\n**What to notice:** {magnitude_note(report)}\n"
    )


def step_views(report: StepReport) -> LabStepViews:
    """The lab's part of the step event."""
    return LabStepViews(
        magnitude_table(report),
        magnitude_histogram(report),
        activation_histogram(report),
    )


def sweep_views(sweep: SweepReport, files: bool = True) -> SweepViews:
    """The sweep's outputs: (reading Markdown, JSON, figure, CSV and JSON files: None unless
    ``files``)."""
    summary = sweep_summary(sweep)
    paths = None
    if files:
        paths = [downloads.sweep_csv(sweep), downloads.summary_json(summary, "sweep")]
    return SweepViews(bullets(summary["reading"]), summary, sweep_figure(sweep), paths)


def preset_number(label: str) -> str:
    """The text of an inspector preset label."""
    return dict(PRESETS)[label]
