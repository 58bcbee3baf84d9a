"""The precision inspector as the page shows it: a line on what was typed, the table, bit rows.

Rule: ``inspection(number)`` is the table (one column per format of the registry, headed by its
name; a row per property, ``stored value`` first), under a line saying what was typed and, when
float64 could not hold it, that each format rounds the typed number itself. ``bit_rows`` is one
row of buttons per format (under a note, shown by the page while the box holds a text not yet
inspected), a button per bit (sign, exponent, mantissa: the format's own
widths); each button carries the inspector's text for its pattern with that bit flipped
(``0x3c01:float16``), which the page types and inspects when it is pressed, as Float Toy does.
"""

from __future__ import annotations

import html
import math
import sys
from decimal import Decimal
from fractions import Fraction
from typing import Any

from playground.core.bounds import ConfigError
from playground.core.inspector.inspector import BitView, inspect_number
from playground.core.inspector.typed_number import SYNTAX, TypedNumber, read_number

# Rows of the table: (name, cell of one format's view). "stored value" is the plain rounding
# (what astype does); the float8 step saturates instead.
ROWS = (
    ("stored value", lambda v: f"{v.stored:.9g}"),
    (
        "the float8 step's cast (saturating)",
        lambda v: f"{v.saturated:.9g}" if v.saturates else "",
    ),
    ("as computed here", lambda v: f"{v.computed_here:.9g}"),
    ("kind", lambda v: v.category),
    ("sign bit", lambda v: f"`{v.sign_bit}`" if v.sign_bit else "none"),
    ("exponent bits", lambda v: f"`{v.exponent_bits}`"),
    ("mantissa bits", lambda v: f"`{v.mantissa_bits}`" if v.mantissa_bits else "none"),
    ("bits (hex)", lambda v: f"`0x{v.raw:0{-(-len(v.bits) // 4)}x}`"),
    ("rounding error", lambda v: f"{v.rounding_error:.3g}"),
    ("relative error", lambda v: f"{v.relative_error:.3g}"),
    ("gap to next value", lambda v: f"{v.gap_to_next:.3g}"),
)
HELP = (
    f"Type {SYNTAX}; Enter to inspect. Each format rounds the typed number once, from its exact "
    "value. Press a bit below to flip it."
)


def typed_line(typed: TypedNumber) -> str:
    """What was typed, and how float64 holds it when that matters (see the module rule)."""
    value = typed.float64
    if typed.bits_of:
        return f"Typed: **{typed.text}**, the {typed.bits_of} bits of {value!r}."
    exact = typed.signed
    if exact is None or (
        math.isfinite(value) and exact in (Fraction(value), Fraction(Decimal(repr(value))))
    ):
        return f"Typed: **{value!r}**"  # float64 holds it, or its shortest form gives it back
    if typed.beyond_float64:
        fate = (
            f"beyond float64's range (its largest is {sys.float_info.max!r}), where it "
            f"would be {value!r}"
        )
    elif typed.below_float64:
        fate = f"below half of float64's smallest subnormal ({math.ulp(0.0)!r}), so float64 "
        fate += f"would hold {value!r}"
    else:
        fate = f"not a float64: float64 would round it to {value!r}"
    return (
        f"Typed: **{typed.text}**, {fate}. Each format below rounds the typed number itself, once."
    )


def inspection(number: Any) -> str:
    """The inspector's table: how ``number`` (a float, or the inspector's text) is stored in
    each registered format. Raises ConfigError naming ``number`` for what it cannot read."""
    typed = number if isinstance(number, TypedNumber) else read_number(number)
    return _table(typed, inspect_number(typed))


def _table(typed: TypedNumber, views: tuple[BitView, ...]) -> str:
    # One column per format and one row per property: short columns stay readable on a phone.
    header = "| property | " + " | ".join(v.dtype for v in views) + " |"
    rule = "|---" * (len(views) + 1) + "|"
    rows = [f"| {name} | " + " | ".join(show(v) for v in views) + " |" for name, show in ROWS]
    return typed_line(typed) + "\n\n" + "\n".join([header, rule, *rows]) + "\n"


def _button(view: BitView, position: int, field: str, bit: str) -> str:
    flipped = view.flipped(position)
    label = (
        f"{bit}: {view.dtype} bit {position}, {field}; press to flip it to {1 - int(bit)} "
        f"({flipped})"
    )
    return (
        f'<button type="button" class="bit {field}" data-bits="{html.escape(flipped)}" '
        f'data-key="{view.dtype}-{position}" aria-label="{html.escape(label)}" '
        f'title="{html.escape(label)}">{bit}</button>'
    )


def bit_rows(views: tuple[BitView, ...], shown: str = "") -> str:
    """One row of bit buttons per format, highest bit first, then the stored value; above them
    a hidden note naming ``shown`` (the text they show), which the page reveals while the box
    holds another text not yet inspected."""
    rows = []
    for view in views:
        position = len(view.bits) - 1
        groups = []
        for field, bits in (
            ("sign", view.sign_bit),
            ("exponent", view.exponent_bits),
            ("mantissa", view.mantissa_bits),
        ):
            buttons = []
            for bit in bits:
                buttons.append(_button(view, position, field, bit))
                position -= 1
            if buttons:
                groups.append(f'<span class="bit-field {field}">{"".join(buttons)}</span>')
        rows.append(
            f'<div class="bit-row" role="group" aria-label="{view.dtype} bits">'
            f'<span class="bit-format">{view.dtype}</span>{"".join(groups)}'
            f'<span class="bit-value">= {view.stored:.9g} ({view.category})</span></div>'
        )
    legend = (
        '<p class="bit-legend">Bits, highest first: <span class="sign">sign</span> '
        '<span class="exponent">exponent</span> <span class="mantissa">mantissa</span>. '
        "Press one to flip it.</p>"
    )
    stale = (
        '<p class="stale-banner inspect-stale" role="status" '
        f'data-typed="{html.escape(shown)}" hidden>'
        f"<strong>Not updated</strong>: the table and bits show {html.escape(shown)}; press "
        "Enter to inspect the text in the box.</p>"
    )
    return stale + legend + "".join(rows)


def inspector_views(text: Any) -> tuple[str, str]:
    """The page's inspector: (the table, the bit rows) for the typed text; a text it cannot
    read gets its message in place of the table and no bit rows (so nothing stale stays)."""
    try:
        typed = read_number(text)
    except ConfigError as error:
        return f"**Invalid {error.field}**: {error}", ""
    views = inspect_number(typed)
    return _table(typed, views), bit_rows(views, str(text))
