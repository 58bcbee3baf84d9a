"""Tests for the command line (``python -m playground``, playground/__main__.py)."""

import json
import subprocess
import sys

from playground import StepConfig, run_report
from playground.__main__ import main


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
