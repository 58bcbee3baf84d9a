"""A visitor's CSV: line ends of every platform, ASCII decimal notation only, and every refusal in
the playground's own words, naming the row and the column."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from playground.core.settings import ConfigError
from playground.core.user_data import parse_csv


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["LF", "CRLF", "CR"])
def test_every_line_end_reads_the_same_rows(end):
    content = end.join([b"a,b,t", b"1,2,3", b"-4.5,.5,6e-1", b""])
    data = parse_csv(content, d_out=1)
    np.testing.assert_array_equal(data.x, np.array([[1, 2], [-4.5, 0.5]], np.float32))
    np.testing.assert_array_equal(data.y, np.array([[3], [0.6]], np.float32))


@pytest.mark.parametrize(
    "cell",
    ["1_000", "\u0661", "\uff11", "0x10", "1,5".replace(",", ";"), "1e", "--1"],
    ids=["underscore", "arabic-indic", "full-width", "hex", "semicolon", "bare-e", "two-signs"],
)
def test_only_ascii_decimal_notation_is_a_number(cell):
    assert float("1e3") == 1000  # the notation itself is fine: only the cell below is refused
    with pytest.raises(ConfigError) as error:
        parse_csv(f"1,2\n{cell},4\n".encode(), d_out=1)
    assert error.value.field == "data"
    assert f"row 2, column 1 is '{cell}', not a number" in str(error.value)


def test_an_over_long_cell_is_named_by_row_and_column_in_our_words():
    limit = csv.field_size_limit()
    content = b"1,2\n3," + b"7" * (limit + 1) + b"\n"
    with pytest.raises(ConfigError) as error:
        parse_csv(content, d_out=1)
    message = str(error.value)
    assert f"row 2, column 2 has more than {limit:,} characters" in message
    assert "field larger than field limit" not in message  # not the csv module's words


def test_non_finite_words_are_refused_as_not_finite():
    with pytest.raises(ConfigError, match="row 2, column 2 is '-inf'; cells must be finite"):
        parse_csv(b"1,2\n3,-inf\n", d_out=1)
