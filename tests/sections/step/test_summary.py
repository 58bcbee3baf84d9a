import json
import math
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

from playground import StepConfig, run_report, summarize
from playground.__main__ import main
from playground.core.data import make_batch
from playground.core.settings import LOSS_SCALE_MAX
from playground.views.numbers import agreeing_digits, json_number


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


def test_agreeing_digits():
    assert agreeing_digits(1.001, 1.0) == pytest.approx(3.0, abs=1e-6)
    assert agreeing_digits(2.0, 2.0) == pytest.approx(-math.log10(2.0**-24))
    assert agreeing_digits(math.nan, 1.0) == 0.0
    assert json_number(math.inf) == "inf" and json_number(3) == 3


def test_cli_prints_the_summary(capsys):
    command = "step --seed 0 --n 32 --d-in 8 --d-out 4 --lr 0.1 --loss-scale 1024"
    code = main(command.split(" "))
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    expected = run_report(StepConfig(n=32, d_in=8, d_out=4, lr=0.1, loss_scale=1024.0))
    assert summary["losses"]["mixed_new"] == expected.mixed_new_loss
    assert summary["config"]["loss_scale"] == 1024.0


def test_cli_reports_bad_input_without_a_traceback():
    result = subprocess.run(
        [sys.executable, "-m", "playground", "step", "--n", "0"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert "n (batch rows N) must be an integer in [1, 4096]" in result.stderr
    assert "Traceback" not in result.stderr


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
