"""The downloads parse back, with the csv and json modules and numpy, to the reports' numbers.

Every comparison is exact: float32 bit for bit (NaN matches NaN), read by Python's float()
(through float64) and by numpy's own float32 parser, independently of the writer.
"""

import csv
import dataclasses
import json
import os
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import examples
from playground import (
    StepConfig,
    dynamics_summary,
    run_dynamics,
    run_report,
    run_sweep,
    summarize,
    sweep_summary,
)
from playground.core.settings import cost
from playground.views import downloads, file_store

# One compiled program serves every float16 report at this shape: S is traced.
FLOAT16 = StepConfig(n=16, d_in=4, d_out=2, compute_dtype="float16")
# The gradients file's value columns and the ParamReport arrays they must hold.
FIELDS = {
    "before": "before",
    "scaled_gradient": "scaled_grads",
    "unscaled_gradient": "mixed_grads",
    "float32_gradient": "float32_grads",
    "update": "updates",
    "mixed_after": "mixed_after",
    "float32_after": "float32_after",
}
GRADIENT_HEADER = ["parameter", "index", *FIELDS]


@pytest.fixture(autouse=True)
def private_dir(tmp_path, monkeypatch):
    """Each test writes into a directory of its own."""
    root = tmp_path / "downloads"
    root.mkdir()
    monkeypatch.setattr(file_store, "_root", str(root))
    return root


REPORT_CONFIG = FLOAT16  # the shared ``report`` fixture's (tests/helpers.py)


@pytest.fixture(scope="module")
def sweep():
    return run_sweep(FLOAT16)  # 17 scales, the last overflowing


@pytest.fixture(scope="module")
def dynamics():
    # float16 at S = 2^20 overflows: the dynamic rule skips and halves, then grows again.
    return run_dynamics(FLOAT16.replace(loss_scale=2.0**20), steps=8, mode="dynamic", period=2)


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as file:
        header, *rows = list(csv.reader(file))
    return header, rows


def parse(texts):
    """float32 values of CSV fields, by Python's float() (a float64 first)."""
    return np.array([float(text) for text in texts], np.float64).astype(np.float32)


def assert_same_float32(actual, expected):
    """Bit-for-bit equal float32 arrays (signed zeros included), NaN where NaN."""
    actual = np.asarray(actual, np.float32).ravel()
    expected = np.asarray(expected, np.float32).ravel()
    assert actual.shape == expected.shape
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(actual), nan)
    np.testing.assert_array_equal(actual.view(np.uint32)[~nan], expected.view(np.uint32)[~nan])


def assert_gradients_round_trip(report, path):
    header, rows = read_csv(path)
    assert header == GRADIENT_HEADER
    assert len(rows) == sum(param.size for param in report.params.values())
    columns = dict(zip(header, zip(*rows, strict=True), strict=True))
    start = 0
    for name, param in report.params.items():
        part = slice(start, start + param.size)
        start += param.size
        assert set(columns["parameter"][part]) == {name}
        indices = [tuple(int(i) for i in text.split(",")) for text in columns["index"][part]]
        assert indices == list(np.ndindex(param.before.shape))
        for column, field in FIELDS.items():
            assert_same_float32(parse(columns[column][part]), getattr(param, field))
    # numpy's own float32 parser agrees, column by column.
    table = np.loadtxt(
        path, np.float32, delimiter=",", quotechar='"', skiprows=1, usecols=range(2, 9), ndmin=2
    )
    for position, field in enumerate(FIELDS.values()):
        expected = np.concatenate([getattr(p, field).ravel() for p in report.params.values()])
        assert_same_float32(table[:, position], expected)


def test_gradients_csv_holds_every_entry_exactly(report):
    path = downloads.gradients_csv(report)
    assert (
        os.path.basename(path) == "gradients_float16_linear_sgd_n16_4x2_lr0.1_S1024_seed0_data0.csv"
    )
    assert_gradients_round_trip(report, path)
    with open(path, encoding="utf-8") as file:
        lines = file.read().splitlines()
    assert lines[1].startswith('kernel,"0,0",') and lines[-1].startswith("bias,1,")


@pytest.mark.parametrize(
    ("loss_scale", "check"),
    [(2.0**126, np.isnan), (50_000.0, np.isinf)],
    ids=["nan", "inf"],
)
def test_nonfinite_gradients_round_trip(loss_scale, check):
    report = run_report(FLOAT16.replace(loss_scale=loss_scale))
    assert any(check(p.scaled_grads).any() for p in report.params.values())
    assert_gradients_round_trip(report, downloads.gradients_csv(report))


def test_special_values_and_random_bit_patterns_round_trip(report):
    """A made-up (11, 12) MLP kernel: every kind of float32, two-digit indices, a dotted name."""
    special = np.array(
        [np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, 3.4028235e38],
        np.float32,
    )
    bits = np.random.default_rng(0).integers(0, 2**32, 11 * 12, dtype=np.uint64)
    values = bits.astype(np.uint32).view(np.float32)
    values[: special.size] = special
    arrays = {
        field: np.roll(values, shift).reshape(11, 12) for shift, field in enumerate(FIELDS.values())
    }
    kernel = dataclasses.replace(report.kernel, name="layers.1.kernel", **arrays)
    odd = dataclasses.replace(report, params={"layers.1.kernel": kernel, "bias": report.bias})
    path = downloads.gradients_csv(odd)
    assert_gradients_round_trip(odd, path)
    with open(path, encoding="utf-8") as file:
        assert '\nlayers.1.kernel,"10,11",' in file.read()


def test_float32_text_is_short_and_exact():
    cases = {
        0.1: "0.1",
        100.0: "100.0",
        1e-4: "0.0001",
        1e-5: "1e-05",
        -7.5: "-7.5",
        123456790.0: "123456790.0",
        1e9: "1e+09",
        1.5e10: "1.5e+10",  # 1.5e10 lies on the rounding boundary and float32(1.5e10) is even
        -0.0: "-0.0",
        1e-45: "1e-45",
        3.4028235e38: "3.4028235e+38",
        np.inf: "inf",
        -np.inf: "-inf",
        np.nan: "nan",
    }
    assert downloads.float32_text(np.array(list(cases), np.float32)) == list(cases.values())
    bits = np.random.default_rng(1).integers(0, 2**32, 2**16, dtype=np.uint64)
    values = bits.astype(np.uint32).view(np.float32)
    texts = downloads.float32_text(values)
    assert_same_float32(parse(texts), values)
    assert_same_float32(np.array(texts).astype(np.float32), values)
    for text, value in zip(texts[:2000], values[:2000], strict=True):
        if np.isfinite(value) and value != 0:  # as short as numpy's shortest repr
            digits = text.split("e")[0].replace("-", "").replace(".", "").strip("0")
            shortest = np.format_float_scientific(value, unique=True).split("e")[0]
            assert len(digits) <= len(shortest.replace("-", "").replace(".", ""))


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(st.floats(width=32), min_size=1, max_size=8))
def test_float32_text_round_trips_any_float32(values):
    values = np.array(values, np.float32)
    texts = downloads.float32_text(values)
    assert_same_float32(parse(texts), values)
    assert_same_float32(np.array(texts).astype(np.float32), values)


def test_sweep_csv_has_a_row_per_scale(sweep):
    path = downloads.sweep_csv(sweep)
    assert os.path.basename(path) == "sweep_float16_linear_sgd_n16_4x2_lr0.1_seed0_data0.csv"
    header, rows = read_csv(path)
    assert header == list(downloads.SWEEP_COLUMNS)
    columns = dict(zip(header, zip(*rows, strict=True), strict=True))
    assert [int(k) for k in columns["log2_scale"]] == sweep.exponents.tolist()
    assert_same_float32(parse(columns["scale"]), 2.0**sweep.exponents)
    for name in ("rel_error", "underflow_share", "nonfinite_share", "new_loss"):
        assert_same_float32(parse(columns[name]), getattr(sweep, name))
    assert [flag == "1" for flag in columns["safe"]] == sweep.safe.tolist()
    assert set(columns["safe"]) == {"0", "1"}


def test_dynamics_csv_rows_are_states_after_k_updates(dynamics):
    assert dynamics.mixed_skipped.any() and not dynamics.mixed_skipped.all()
    path = downloads.dynamics_csv(dynamics)
    assert os.path.basename(path) == (
        "dynamics_float16_linear_sgd_n16_4x2_lr0.1_S1048576_dynamic_8steps_period2_seed0_data0.csv"
    )
    header, rows = read_csv(path)
    assert header[:4] == ["step", "float32_loss", "mixed_loss", "pure_loss"]
    assert len(rows) == dynamics.steps + 1
    columns = dict(zip(header, zip(*rows, strict=True), strict=True))
    assert [int(k) for k in columns["step"]] == list(range(dynamics.steps + 1))
    for name in downloads.DYNAMICS_LOSSES:  # row k: the loss after k updates
        assert_same_float32(parse(columns[name]), getattr(dynamics, name))
    for name in downloads.DYNAMICS_PER_STEP:  # row k >= 1: the update that made it, k - 1
        assert columns[name][0] == ""
        expected = getattr(dynamics, name)
        if name.endswith("_skipped"):
            assert [flag == "1" for flag in columns[name][1:]] == expected.tolist()
        else:
            assert_same_float32(parse(columns[name][1:]), expected)
    k = int(np.argmax(dynamics.mixed_skipped)) + 1
    assert rows[k][header.index("mixed_skipped")] == "1"
    assert float(rows[k][header.index("mixed_scale")]) == dynamics.mixed_scale[k - 1]
    assert float(rows[k][header.index("mixed_loss")]) == dynamics.mixed_loss[k]


def test_summary_json_is_strict_json_of_the_summary(report, sweep, dynamics):
    run = "float16_linear_sgd_n16_4x2_lr0.1_S1048576_dynamic_8steps_period2_seed0_data0"
    cases = [
        (
            summarize(report),
            "summary",
            "summary_float16_linear_sgd_n16_4x2_lr0.1_S1024_seed0_data0",
        ),
        (sweep_summary(sweep), "sweep", "sweep_float16_linear_sgd_n16_4x2_lr0.1_seed0_data0"),
        (dynamics_summary(dynamics), "dynamics", f"dynamics_{run}"),
        ({"a": [1, "nan"]}, "my notes!", "my-notes"),
    ]
    for summary, name, stem in cases:
        path = downloads.summary_json(summary, name)
        assert os.path.basename(path) == f"{stem}.json"
        with open(path, encoding="utf-8") as file:
            text = file.read()
        assert json.loads(text) == json.loads(json.dumps(summary))
        json.loads(text, parse_constant=pytest.fail)  # no NaN or Infinity literals


def test_names_say_the_model_and_the_run():
    mlp = StepConfig(model="mlp", hidden_layers=3, hidden_width=32, optimizer="adam", lr=1e-3)
    assert downloads.settings_tag(mlp.to_dict(), run=True) == (
        "bfloat16_mlp3x32-relu_adam_n256_64x16_lr0.001_S1024_static_200steps_seed0_data0"
    )
    tag = downloads.settings_tag(StepConfig(loss_scale=2.0**126).to_dict(), scale=True)
    assert tag == "bfloat16_linear_sgd_n256_64x16_lr0.1_S8.50706e37_seed0_data0"
    path = downloads.text_file("print('hi')\n", "step script.py")
    assert os.path.basename(path) == "step-script.py"
    with open(path, encoding="utf-8") as file:
        assert file.read() == "print('hi')\n"


def test_summary_json_refuses_nan_before_making_a_file(private_dir):
    with pytest.raises(ValueError):
        downloads.summary_json({"loss": float("nan")}, "summary")
    with pytest.raises(ValueError):
        downloads.summary_json({}, "///")
    assert os.listdir(private_dir) == []


def test_a_too_large_report_is_refused_with_its_size(report, monkeypatch, private_dir):
    monkeypatch.setattr(cost, "MAX_GRADIENT_ROWS", 9)
    with pytest.raises(ValueError, match=r"10 entries .* more than the 9 allowed"):
        downloads.gradients_csv(report)
    assert os.listdir(private_dir) == []


def test_old_files_are_deleted_when_a_file_is_written(private_dir):
    old, recent = (downloads.summary_json({"n": n}, "old") for n in range(2))
    an_hour_ago = os.path.getmtime(old) - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    new = downloads.summary_json({"n": 2}, "new")
    assert not os.path.exists(old) and not os.path.exists(os.path.dirname(old))
    assert os.path.exists(recent) and os.path.exists(new)
    assert len(os.listdir(private_dir)) == 2


def test_the_newest_files_are_kept_within_the_caps(private_dir, monkeypatch):
    monkeypatch.setattr(file_store, "MAX_FILES", 3)
    paths = []
    for n in range(6):
        paths.append(downloads.summary_json({"n": n}, "same"))
        stamp = time.time() - 100 + n  # distinct ages, none expired
        os.utime(paths[-1], (stamp, stamp))
        assert len(os.listdir(private_dir)) == min(n + 1, 3)
    assert [os.path.exists(path) for path in paths] == [False] * 3 + [True] * 3
    assert len({os.path.basename(path) for path in paths}) == 1  # same name, own directories
    size = os.path.getsize(paths[-1])
    monkeypatch.setattr(file_store, "MAX_BYTES", 2 * size)
    downloads.summary_json({"n": 9}, "same")
    assert len(os.listdir(private_dir)) == 2


def test_concurrent_writers_get_their_own_files(report):
    paths = []
    threads = [
        threading.Thread(target=lambda: paths.append(downloads.gradients_csv(report)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(paths)) == 4
    for path in paths:
        assert_gradients_round_trip(report, path)


def test_the_directory_is_made_on_first_use_and_removed_at_exit(monkeypatch):
    at_exit = []
    monkeypatch.setattr(file_store, "_root", None)
    monkeypatch.setattr(
        file_store.atexit, "register", lambda *call, **keywords: at_exit.append((call, keywords))
    )
    path = downloads.summary_json({"a": 1}, "a")
    root = os.path.dirname(os.path.dirname(path))
    assert root == downloads.download_dir() and len(at_exit) == 1
    assert os.path.basename(root).startswith("playground-downloads-")
    (function, *args), keywords = at_exit[0]
    function(*args, **keywords)
    assert not os.path.exists(root)


def test_a_file_past_the_total_cap_is_refused_and_leaves_nothing(report, monkeypatch, private_dir):
    monkeypatch.setattr(file_store, "MAX_BYTES", 500)  # the gradients file is about 1 KB
    with pytest.raises(file_store.DiskFull, match="at most 0 MB of files"):
        downloads.gradients_csv(report)
    assert os.listdir(private_dir) == []


def test_the_oldest_downloads_make_room_for_a_new_one(private_dir, monkeypatch):
    paths = [downloads.text_file("x" * 100, f"file{n}.txt") for n in range(3)]
    for age, path in zip((30, 20, 10), paths, strict=True):
        stamp = time.time() - age
        os.utime(path, (stamp, stamp))
    monkeypatch.setattr(file_store, "MAX_BYTES", 350)  # room for three files of 100 bytes
    new = downloads.text_file("y" * 100, "new.txt")
    assert [os.path.exists(path) for path in paths] == [False, True, True]
    assert os.path.exists(new)
    assert (
        sum(
            os.path.getsize(os.path.join(private_dir, d, f))
            for d in os.listdir(private_dir)
            for f in os.listdir(os.path.join(private_dir, d))
        )
        <= 350
    )
