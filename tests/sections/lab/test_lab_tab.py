"""The precision lab section's inspector as the page shows it: the typed line, the table and the
bit rows, read and refused without Gradio."""

from __future__ import annotations

import math
import sys
from html.parser import HTMLParser

import ml_dtypes
import numpy as np
import pytest

from playground.core.formats.dtypes import FORMATS, dtype_facts, numpy_dtype
from playground.core.inspector.typed_number import read_number
from playground.sections.lab.inspector_view import inspection, inspector_views


def _table(markdown: str) -> dict[str, dict[str, str]]:
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")][1:]
    return {
        cells[0]: dict(zip(header, cells[1:], strict=True))
        for cells in ([c.strip() for c in line.strip("|").split("|")] for line in lines[2:])
    }


class _Buttons(HTMLParser):
    """The bit buttons of the rows: (row's format, text, data-bits, aria-label)."""

    def __init__(self):
        super().__init__()
        self.row, self.buttons, self._open = None, [], None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if attrs.get("class") == "bit-row":
            self.row = attrs["aria-label"].split()[0]
        if tag == "button":
            self._open = attrs

    def handle_data(self, data):
        if self._open is not None:
            self.buttons.append((self.row, data, self._open["data-bits"], self._open["aria-label"]))
            self._open = None


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("1e-8", "Typed: **1e-08**"),
        ("0x1p-24", "Typed: **5.960464477539063e-08**"),
        ("inf", "Typed: **inf**"),
        ("-inf", "Typed: **-inf**"),
        ("nan", "Typed: **nan**"),
        ("0x3c00:float16", "Typed: **0x3c00:float16**, the float16 bits of 1.0"),
    ],
)
def test_the_page_inspector_reads_decimal_hex_specials_and_bits(text, shown):
    table, bits = inspector_views(text)
    assert table.startswith(shown), table
    assert list(_table(table)["stored value"]) == list(FORMATS)
    assert bits.count("bit-row") == len(FORMATS)


def test_a_decimal_beyond_float64_says_so_and_has_an_infinite_error():
    table = inspection("1e400")
    first = table.splitlines()[0]
    assert "Typed: **1e400**" in first and "beyond float64" in first
    assert repr(sys.float_info.max) in first and "Typed: **inf**" not in table
    rows = _table(table)
    assert rows["stored value"]["float16"] == "inf"
    assert rows["rounding error"]["float32"] == "inf" and rows["relative error"]["float32"] == "inf"


def test_a_decimal_float64_cannot_hold_exactly_is_named_as_typed():
    first = inspection("0.1000000000000000000001").splitlines()[0]
    assert "Typed: **0.1000000000000000000001**" in first and "would round it to 0.1" in first
    assert inspection("1/3").startswith("Typed: **1/3**")


@pytest.mark.parametrize("text", ["abc", "ff", "", None, "1e-8x", "0x10000:float16"])
def test_the_page_inspector_refuses_text_that_is_no_number(text):
    shown, bits = inspector_views(text)
    assert shown.startswith("**Invalid number**") and "Typed" not in shown, shown
    assert bits == ""


@pytest.mark.parametrize("text", ["1.0001", "-500", "nan", "1e-6"])
def test_every_bit_is_a_button_that_flips_exactly_that_bit(text):
    parser = _Buttons()
    parser.feed(inspector_views(text)[1])
    for dtype in FORMATS:
        buttons = [b for b in parser.buttons if b[0] == dtype]
        width = dtype_facts(dtype).bits  # float4_e2m1fn: 4 bits, held in a byte by numpy
        assert len(buttons) == width, dtype
        shown = "".join(bit for _, bit, _, _ in buttons)  # highest bit first
        stored = np.asarray(read_number(text).float64).astype(numpy_dtype(dtype))
        raw = int(stored.view(f"uint{stored.itemsize * 8}")) & (2**width - 1)
        if not math.isnan(float(stored)):  # NaN's payload is the format's own choice
            assert int(shown, 2) == raw, (dtype, shown)
        for index, (_, bit, flipped, label) in enumerate(buttons):
            pattern, name = flipped.split(":")
            assert name == dtype
            assert int(pattern, 16) ^ int(shown, 2) == 1 << (width - 1 - index)
            # The accessible name starts with the text the button shows.
            assert label.startswith(f"{bit}: {dtype} bit {width - 1 - index}")
            assert read_number(flipped).bits_of == dtype


def test_the_bit_rows_carry_a_hidden_note_naming_the_text_they_show():
    _, bits = inspector_views("65519.99998")
    note = bits.split("</p>")[0]
    assert 'class="stale-banner inspect-stale"' in note and " hidden>" in note
    assert 'data-typed="65519.99998"' in note and "show 65519.99998" in note


def test_the_intro_states_the_block_formats_rules_as_ml_dtypes_casts():
    from playground.sections.lab.tab import INSPECTOR_INTRO

    text = " ".join(INSPECTOR_INTRO.split())
    e2m1, e8m0 = ml_dtypes.float4_e2m1fn, ml_dtypes.float8_e8m0fnu
    largest = float(ml_dtypes.finfo(e2m1).max)
    with np.errstate(over="ignore", invalid="ignore"):
        clipped = float(np.asarray([7.0, np.inf], np.float32).astype(e2m1).astype(float).max())
        assert clipped == largest and f"clips anything past {largest:g}" in text
        assert float(np.asarray(np.nan, np.float32).astype(e2m1)) == 0  # "NaN as a zero"
        low, high = (
            int(math.log2(float(x)))
            for x in (ml_dtypes.finfo(e8m0).tiny, ml_dtypes.finfo(e8m0).max)
        )
        assert f"powers of two 2^{low} to 2^{high} and NaN" in text
        three = float(np.asarray(3.0, np.float32).astype(e8m0))
        assert f"(3 is stored as {three:g})" in text
        assert all(math.isnan(float(np.asarray(v, np.float32).astype(e8m0))) for v in (0, -1))


def test_e8m0_has_no_sign_and_no_mantissa_bits_in_the_table():
    rows = _table(inspection("4"))
    assert rows["sign bit"]["float8_e8m0fnu"] == rows["mantissa bits"]["float8_e8m0fnu"] == "none"
    raw = int(np.asarray(4.0, np.float32).astype(ml_dtypes.float8_e8m0fnu).view(np.uint8))
    assert rows["exponent bits"]["float8_e8m0fnu"] == f"`{raw:08b}`"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "nvfp4"])
def test_the_magnitude_texts_never_ask_to_switch_to_the_dtype_already_selected(dtype):
    from playground import StepConfig, run_report
    from playground.sections.lab.tab import PRECISION_LAB, magnitude_table

    report = run_report(StepConfig(n=32, d_in=8, d_out=4, compute_dtype=dtype))
    shown = PRECISION_LAB + magnitude_table(report)
    assert f"Switch the compute dtype to {dtype}" not in shown
    # A block recipe saturates rather than overflowing: no plain-format words for its bands.
    if dtype == "nvfp4":
        assert "becomes infinite" not in shown


@pytest.mark.parametrize("dtype", ["float16", "nvfp4"])
def test_every_header_cell_of_the_magnitude_counts_is_named(dtype):
    # axe-core's empty-table-header: a screen reader reads each row's kind with its header.
    from playground import StepConfig, run_report
    from playground.sections.lab.tab import magnitude_table

    table = magnitude_table(run_report(StepConfig(n=32, d_in=8, d_out=4, compute_dtype=dtype)))
    header = next(line for line in table.splitlines() if line.startswith("| "))
    cells = [cell.strip() for cell in header.strip().strip("|").split("|")]
    assert len(cells) == 3 and all(cells), cells
    assert cells[0] == "Gradient entries"
