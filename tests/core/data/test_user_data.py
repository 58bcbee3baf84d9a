"""A visitor's CSV: line ends of every platform, ASCII decimal notation only, and every refusal in
the playground's own words, naming the row and the column."""

from __future__ import annotations

import csv

import numpy as np
import pytest

from playground.core.data.user_data import parse_csv
from playground.core.settings.settings import ConfigError


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


# --- the shapes follow the file ------------------------------------------------------------------

TABLE = np.random.default_rng(3).standard_normal((9, 5)).round(4)


def _text(header: list[str] | None, rows: np.ndarray) -> bytes:
    lines = [",".join(header)] if header else []
    lines += [",".join(repr(float(v)) for v in row) for row in rows]
    return ("\n".join(lines) + "\n").encode()


@pytest.mark.parametrize(
    ("header", "targets"),
    [
        (["a", "y", "b", "c", "d"], [1]),
        (["Y1", "x1", "x2", "y_2", "x3"], [0, 3]),
        (["x", "target", "target price", "w", "z"], [1, 2]),
        (["f", "g", "h", "y[0]", "TARGET-1"], [3, 4]),
    ],
    ids=["y", "y1-and-y_2", "target-and-target-price", "bracket-and-dash"],
)
def test_a_header_naming_targets_picks_them_wherever_they_are_whatever_d_out(header, targets):
    inputs = [c for c in range(5) if c not in targets]
    for d_out in (1, 3, 16):
        data = parse_csv(_text(header, TABLE), d_out=d_out)
        np.testing.assert_array_equal(data.y, TABLE[:, targets].astype(np.float32))
        np.testing.assert_array_equal(data.x, TABLE[:, inputs].astype(np.float32))
        assert data.shapes() == {"n": 9, "d_in": len(inputs), "d_out": len(targets)}


@pytest.mark.parametrize("header", [["year", "x", "b", "targets", "yy"], None])
def test_without_target_names_the_last_d_out_columns_are_the_targets(header):
    # "year", "targets" and "yy" are no target names: the rule takes y or target alone, or
    # followed by a digit or a separator.
    data = parse_csv(_text(header, TABLE), d_out=2)
    np.testing.assert_array_equal(data.y, TABLE[:, 3:].astype(np.float32))
    assert data.shapes() == {"n": 9, "d_in": 3, "d_out": 2}


@pytest.mark.parametrize("d_out", [5, 16])
def test_a_d_out_that_leaves_no_input_column_takes_the_last_column_alone(d_out):
    data = parse_csv(_text(None, TABLE), d_out=d_out)
    np.testing.assert_array_equal(data.y, TABLE[:, 4:].astype(np.float32))
    np.testing.assert_array_equal(data.x, TABLE[:, :4].astype(np.float32))


def test_fit_takes_n_d_in_and_d_out_from_the_data():
    from playground.core.settings.settings import StepConfig

    data = parse_csv(_text(["a", "b", "y1", "c", "y2"], TABLE), d_out=16)
    fitted = data.fit(StepConfig())  # the defaults: N = 256, D_in = 64, D_out = 16
    assert (fitted.n, fitted.d_in, fitted.d_out) == (9, 3, 2)
    assert fitted.lr == StepConfig().lr  # nothing else moves


def test_caps_are_still_refused_naming_the_field():
    from playground.core.settings.settings import settings

    max_in, max_out = int(settings()["d_in"].high), int(settings()["d_out"].high)
    wide = np.ones((2, max_in + 2))
    with pytest.raises(ConfigError) as error:
        parse_csv(_text(None, wide), d_out=1)
    assert error.value.field == "data"
    assert f"{max_in + 1} input columns; at most {max_in} (the cap on input width D_in)" in str(
        error.value
    )
    header = ["x"] + [f"y{c}" for c in range(max_out + 1)]
    with pytest.raises(ConfigError) as error:
        parse_csv(_text(header, np.ones((2, max_out + 2))), d_out=1)
    assert f"{max_out + 1} target columns; at most {max_out} (the cap on output width D_out)" in (
        str(error.value)
    )
