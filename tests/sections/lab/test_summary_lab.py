"""Tests for playground.sections.lab.summary: the sweep's reading."""

from playground import StepConfig
from playground.core.sweep import run_sweep
from playground.sections.lab.summary import sweep_summary

# float16 data near 2^-12: a scale of 2^10 recovers its gradients, too large a scale overflows.
TINY_FLOAT16 = StepConfig(
    n=32,
    d_in=8,
    d_out=4,
    compute_dtype="float16",
    input_scale=2.0**-12,
    target_scale=2.0**-12,
    loss_scale=2.0**10,
)


def test_sweep_summary_reading_names_the_window_and_the_users_scale():
    summary = sweep_summary(run_sweep(TINY_FLOAT16))
    assert summary["safe_log2_scales"][0] <= 10 <= summary["safe_log2_scales"][-1]
    assert "inside" in summary["reading"][1]
    assert any("overflow" in sentence for sentence in summary["reading"])
