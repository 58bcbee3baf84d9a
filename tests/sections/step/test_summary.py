import json
import math

import ml_dtypes
import numpy as np

from playground import StepConfig, run_report, summarize
from playground.core.data.synthetic import make_batch
from playground.core.settings.settings import LOSS_SCALE_MAX


def test_summary_is_strict_json_with_the_report_numbers():
    report = run_report(
        StepConfig(n=32, d_in=8, d_out=4, loss_scale=LOSS_SCALE_MAX, compute_dtype="float16")
    )
    summary = summarize(report)
    text = json.dumps(summary, allow_nan=False)
    assert json.loads(text)["losses"]["mixed_new"] == "nan"
    assert summary["losses"]["float32_new"] == report.float32_new_loss
    assert summary["params"]["kernel"]["nonfinite_scaled_count"] == 32
    assert any("overflowed" in sentence for sentence in summary["reading"])


def test_float8_reading_names_the_scaling_and_counts_what_flushed():
    # Inputs near 2^-10, below half E4M3's smallest subnormal (2^-10 itself), with no scaling.
    config = StepConfig(
        n=32, d_in=8, d_out=4, compute_dtype="float8", fp8_scaling="none", input_scale=2.0**-10
    )
    summary = summarize(run_report(config))
    x, _ = make_batch(config)
    flushed = int(np.sum((x != 0) & (x.astype(ml_dtypes.float8_e4m3fn) == 0)))
    assert 0 < flushed < x.size
    tensors = {t["role"]: t for t in summary["float8"]}
    assert tensors["input"]["flushed"] == flushed and tensors["input"]["scale"] == 1
    assert tensors["gradient"]["format"] == "float8_e5m2"
    reading = " ".join(summary["reading"])
    assert "No per-tensor scaling (fp8_scaling none)" in reading
    assert f"(kernel input {flushed:,} of {x.size:,})" in reading
    assert "float8_e4m3fn (largest 448, smallest subnormal 0.00195)" in reading
    json.dumps(summary, allow_nan=False)


def test_a_non_finite_loss_is_not_given_agreeing_digits():
    from playground.sections.step.summary import reading

    report = run_report(
        StepConfig(n=32, d_in=8, d_out=4, compute_dtype="float16", loss_scale=2.0**16)
    )
    first = reading(report)[0]
    assert not math.isfinite(report.mixed_new_loss)
    assert "significant digits" not in first and "not a finite number" in first, first
