"""The precision lab section's inspector text, read and refused without Gradio."""

from __future__ import annotations

import math

import pytest


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e-8", 1e-8),
        ("0x1p-24", 2.0**-24),
        ("-0X1.8p1", -3.0),
        ("inf", math.inf),
        (" -inf ", -math.inf),
        ("1e400", math.inf),
        ("\u22122.5", -2.5),
    ],
)
def test_the_page_inspector_reads_decimal_hex_and_infinite_text(text, value):
    from playground.sections.lab.tab import parse_number

    assert parse_number(text) == value


@pytest.mark.parametrize("text", ["abc", "ff", "nan", "", None, "1e-8x"])
def test_the_page_inspector_refuses_text_that_is_no_number(text):
    from playground.sections.lab.tab import inspect_text

    shown = inspect_text(text)
    assert shown.startswith("**Invalid number**") and "Typed" not in shown, shown
