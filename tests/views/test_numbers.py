"""Tests for playground.views.numbers: digits of agreement and numbers as JSON."""

import math

import pytest

from playground.views.numbers import agreeing_digits, json_number


def test_agreeing_digits():
    assert agreeing_digits(1.001, 1.0) == pytest.approx(3.0, abs=1e-6)
    assert agreeing_digits(2.0, 2.0) == pytest.approx(-math.log10(2.0**-24))
    assert agreeing_digits(math.nan, 1.0) == 0.0
    assert json_number(math.inf) == "inf" and json_number(3) == 3


def test_a_factor_is_written_one_way_in_every_text_that_gives_one():
    import re

    from playground.core.runs.sweep import SAFE_FACTOR
    from playground.sections.lab.tab import sweep_intro
    from playground.views.numbers import factor_text

    assert [factor_text(v) for v in (2.0, 0.74481, 32067.2, 1.565e11)] == [
        "2 x",
        "0.7448 x",
        "3.207e+04 x",
        "1.565e+11 x",
    ]
    # The sweep's window is a factor like any other: "2 x", never "2x" (nor "32,067 x").
    assert f"within {SAFE_FACTOR:g} x the best error" in " ".join(sweep_intro().split())
    assert not re.search(r"\dx\b|\d,\d{3} x", sweep_intro())
