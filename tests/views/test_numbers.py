"""Tests for playground.views.numbers: digits of agreement and numbers as JSON."""

import math

import pytest

from playground.views.numbers import agreeing_digits, json_number


def test_agreeing_digits():
    assert agreeing_digits(1.001, 1.0) == pytest.approx(3.0, abs=1e-6)
    assert agreeing_digits(2.0, 2.0) == pytest.approx(-math.log10(2.0**-24))
    assert agreeing_digits(math.nan, 1.0) == 0.0
    assert json_number(math.inf) == "inf" and json_number(3) == 3
