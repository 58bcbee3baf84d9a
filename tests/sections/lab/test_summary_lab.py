"""Tests for playground.sections.lab.summary: the sweep's reading."""

from playground.core.runs.sweep import run_sweep
from playground.sections.lab.summary import sweep_summary
from scenarios import TINY_FLOAT16


def test_sweep_summary_reading_names_the_window_and_the_users_scale():
    summary = sweep_summary(run_sweep(TINY_FLOAT16))
    assert summary["safe_log2_scales"][0] <= 10 <= summary["safe_log2_scales"][-1]
    assert "inside" in summary["reading"][1]
    assert any("overflow" in sentence for sentence in summary["reading"])
