"""An uploaded class column through the API: /step with task=classification trains on its
one-hot classes, and a bad class is refused naming its cell, in the app's words."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from playground import StepConfig, run_report
from playground.core.data.user_data import UserData
from playground.core.frozen import freeze

LABELS = [2, 0, 1, 2, 1, 0, 0, 2]


def _write(path: Path, labels: list) -> str:
    rows = np.random.default_rng(3).standard_normal((len(labels), 2)).round(3)
    lines = ["u,v,class", *(f"{a},{b},{label}" for (a, b), label in zip(rows, labels, strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_a_class_column_upload_runs_a_classification_step_and_names_a_bad_class(
    client, tmp_path: Path
):
    from gradio_client import handle_file
    from gradio_client.exceptions import AppError

    upload = handle_file(_write(tmp_path / "classes.csv", LABELS))
    _, summary, *_ = client.predict(d_out=3, task="classification", data=upload, api_name="/step")
    assert summary["config"]["task"] == "classification"
    assert (summary["config"]["n"], summary["config"]["d_in"]) == (8, 2)
    assert summary["operations"]["rows"][-1]["operation"] == "softmax cross-entropy"
    # The step the server ran is the one of these inputs and their classes one-hot, built here.
    x = np.loadtxt(tmp_path / "classes.csv", delimiter=",", skiprows=1, usecols=(0, 1))
    one_hot = np.eye(3, dtype=np.float32)[LABELS]
    data = UserData("classes.csv", freeze(x.astype(np.float32)), freeze(one_hot))
    expected = run_report(StepConfig(task="classification", d_out=3), data)
    assert summary["losses"]["mixed_new"] == expected.mixed_new_loss

    bad = handle_file(_write(tmp_path / "bad.csv", [*LABELS[:4], 3, *LABELS[5:]]))
    with pytest.raises(AppError) as caught:
        client.predict(d_out=3, task="classification", data=bad, api_name="/step")
    message = str(caught.value)
    assert "whole number in [0, 2] (D_out = 3 classes); row 6, column 3 has 3" in message
