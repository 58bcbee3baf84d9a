"""The precision lab's endpoints (sweep, inspector) and the step's magnitude chart, called
directly, without a server."""

from __future__ import annotations

import json
import math
from pathlib import Path

import gradio as gr
import ml_dtypes
import numpy as np
import plotly.graph_objects as go
import pytest

from helpers import plotly_sent, step_inputs
from playground import StepConfig
from playground.core.formats.dtypes import dtype_facts
from playground.core.settings.settings import defaults
from playground.ui.arguments import STEP
from playground.ui.endpoints import FIGURE_LABELS, run_step
from playground.ui.tabs.lab import inspect_event, run_sweep_event
from reference import band_labels

INPUT_ORDER = STEP.before_data

SMALL = {"n": 32, "d_in": 8, "d_out": 4}
TINY_FLOAT16 = {
    **SMALL,
    "compute_dtype": "float16",
    "input_scale": 2.0**-12,
    "target_scale": 2.0**-12,
}
# run_step returns (headline, summary, magnitude counters, *figures in FIGURE_LABELS order).
TEXT_OUTPUTS = 3
MAGNITUDES = TEXT_OUTPUTS + FIGURE_LABELS.index("Gradient magnitudes against the dtype's ranges")
BAND_LABELS = ("flushed to 0", "subnormal", "normal", "overflow")


def _format_limits(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Largest, smallest normal and smallest subnormal value of an IEEE-style binary format.

    Written from the format definition (bias = 2^(e-1) - 1; the all-ones exponent is inf/NaN),
    independently of jnp.finfo, which the app reads.
    """
    bias = 2 ** (exponent_bits - 1) - 1
    return {
        "max": (2 - 2.0**-mantissa_bits) * 2.0**bias,
        "smallest_normal": 2.0 ** (1 - bias),
        "smallest_subnormal": 2.0 ** (1 - bias - mantissa_bits),
    }


FORMATS = {"float16": _format_limits(5, 10), "bfloat16": _format_limits(8, 7)}


def _table(markdown: str) -> dict[str, dict[str, str]]:
    """The inspector's Markdown table as {row name: {dtype: cell}}."""
    lines = [line for line in markdown.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")][1:]
    rows = {}
    for line in lines[2:]:
        name, *cells = (cell.strip() for cell in line.strip("|").split("|"))
        rows[name] = dict(zip(header, cells, strict=True))
    return rows


def _figure(plot) -> go.Figure:
    return go.Figure(plotly_sent(plot))  # raises ValueError on any invalid property


# --- sweep -----------------------------------------------------------------------------------


def test_sweep_finds_the_float16_window_and_reports_the_overflow():
    reading, summary, plot, files = run_sweep_event(
        *step_inputs(INPUT_ORDER, **TINY_FLOAT16), downloads=True
    )
    assert [Path(f).suffix for f in files] == [".csv", ".json"]
    assert summary["config"] == StepConfig(**(defaults() | TINY_FLOAT16)).to_dict()
    safe = summary["safe_log2_scales"]
    assert 10 in safe, safe  # the page's default S = 2^10 is safe for tiny float16 gradients
    assert 0 not in safe, safe  # unscaled, most of them flush to zero
    assert 16 not in safe, safe  # 2^16 > 65504: the scaled gradients overflow
    assert summary["log2_scales"][0] == 0 and summary["log2_scales"][-1] == 16
    assert "overflow" in reading
    assert f"2^{min(safe)} to 2^{max(safe)}" in reading
    assert reading.startswith("- ")  # Markdown bullets, one per sentence
    assert reading.count("\n- ") == len(summary["reading"]) - 1
    figure = _figure(plot)
    assert len(figure.data) >= 4
    assert "Loss-scale sweep (float16)" in figure.layout.title.text


def test_sweep_refuses_invalid_config_naming_the_field():
    with pytest.raises(gr.Error) as caught:
        run_sweep_event(*step_inputs(INPUT_ORDER, **(SMALL | {"n": 0})))
    assert caught.value.message.startswith("n (batch rows N) must be an integer")


# --- inspector -------------------------------------------------------------------------------


def test_inspector_shows_float16_flushing_what_bfloat16_keeps():
    table = _table(inspect_event(1e-9))
    assert list(table["stored value"]) == [
        "float32",
        "bfloat16",
        "float16",
        "float8_e4m3fn",
        "float8_e5m2",
        "float4_e2m1fn",  # the block formats' columns come after the step's, never before
        "float8_e8m0fnu",
    ]
    assert table["stored value"]["float16"] == "0"
    assert table["kind"]["float16"] == "zero"
    assert table["kind"]["bfloat16"] == "normal"
    assert float(table["stored value"]["bfloat16"]) == pytest.approx(1e-9, rel=2**-8)


@pytest.mark.parametrize("number", [7.0, 3.0, 0.0, -1.0, 0.3, 1e-40, 1e39])
def test_inspector_block_columns_hold_what_ml_dtypes_stores(number):
    table = _table(inspect_event(number))
    peers = {"float4_e2m1fn": ml_dtypes.float4_e2m1fn, "float8_e8m0fnu": ml_dtypes.float8_e8m0fnu}
    for name, dtype in peers.items():
        with np.errstate(over="ignore", invalid="ignore"):
            peer = float(np.asarray(number, np.float32).astype(dtype))  # exact: a float32
        assert table["stored value"][name] == f"{peer:.9g}", (number, name)


def test_inspector_shows_bfloat16_rounding_one_plus_a_bit_to_one():
    table = _table(inspect_event(1 + 1e-4))
    assert table["stored value"]["bfloat16"] == "1"
    assert table["stored value"]["float32"] != "1"
    assert float(table["stored value"]["float32"]) == pytest.approx(1 + 1e-4, rel=2**-23)


def test_inspector_shows_e4m3s_plain_cast_and_the_float8_steps_saturated_one():
    table = _table(inspect_event(500))
    saturated = table["the float8 step's cast (saturating)"]
    # E4M3FN has no inf: the plain cast of 500 is NaN; the step clips to its largest, 448.
    assert table["stored value"]["float8_e4m3fn"] == "nan"
    assert saturated["float8_e4m3fn"] == f"{(2 - 2 * 2**-3) * 2 ** (15 - 7):g}" == "448"
    assert saturated["float8_e5m2"] == table["stored value"]["float8_e5m2"] == "512"
    assert saturated["float32"] == ""  # no step saturates a 16- or 32-bit format


@pytest.mark.parametrize("value", ["abc", None, True])  # nan is read now (issue 22)
def test_inspector_refuses_what_is_not_a_real_number(value):
    with pytest.raises(gr.Error) as caught:
        inspect_event(value)
    assert caught.value.message.startswith("number must be a real number"), caught.value.message


def test_inspector_refuses_an_int_too_large_for_a_float():
    # JSON has big integers, so an API caller can send one; expected: gr.Error, not a traceback.
    with pytest.raises(gr.Error):
        inspect_event(10**400)


# --- magnitude chart bands -------------------------------------------------------------------


def test_format_limits_match_the_app_dtype_facts():
    for dtype, limits in FORMATS.items():
        facts = dtype_facts(dtype)
        assert facts.max == limits["max"], dtype
        assert facts.smallest_normal == limits["smallest_normal"], dtype
        assert facts.smallest_subnormal == limits["smallest_subnormal"], dtype


def _bands(dtype: str) -> tuple[list, list]:
    outputs = run_step(*step_inputs(INPUT_ORDER, **SMALL, compute_dtype=dtype))
    figure = json.loads(outputs[MAGNITUDES].plot)
    go.Figure(figure)
    assert figure["layout"]["title"]["text"] == f"Gradient magnitudes against {dtype}'s ranges"
    return figure["layout"]["shapes"], figure["layout"]["annotations"]


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_magnitude_bands_sit_at_the_format_limits(dtype):
    shapes, notes = _bands(dtype)
    limits = FORMATS[dtype]
    # Magnitudes at or below half the smallest subnormal round to zero (ties to even); the
    # subnormal band starts just above them.
    rounds_to_zero = math.log2(limits["smallest_subnormal"]) - 1
    edges = [rounds_to_zero] + [math.log2(limits[name]) for name in ("smallest_normal", "max")]
    assert len(shapes) == len(BAND_LABELS)
    assert all(s["type"] == "rect" and s["xref"] == "x" for s in shapes)
    # Adjacent bands share their edges: flushed | subnormal | normal | overflow.
    for left, right, edge in zip(shapes[:-1], shapes[1:], edges, strict=True):
        assert left["x1"] == pytest.approx(edge, abs=1e-12)
        assert right["x0"] == pytest.approx(edge, abs=1e-12)
    assert shapes[0]["x0"] < edges[0] and shapes[-1]["x1"] > edges[-1]
    assert [note["text"] for note in notes] == band_labels(dtype)
    for shape, note in zip(shapes, notes, strict=True):
        assert note["x"] == pytest.approx((shape["x0"] + shape["x1"]) / 2)


def test_float8_magnitudes_are_placed_on_e5m2_the_gradient_format():
    outputs = run_step(*step_inputs(INPUT_ORDER, **SMALL, compute_dtype="float8"))
    figure = json.loads(outputs[MAGNITUDES].plot)
    assert figure["layout"]["title"]["text"] == "Gradient magnitudes against float8_e5m2's ranges"
    limits = _format_limits(5, 2)  # E5M2 is IEEE-style: largest 57344, subnormals to 2^-16
    shapes = figure["layout"]["shapes"]
    assert shapes[1]["x0"] == math.log2(limits["smallest_subnormal"]) - 1 == -17
    assert shapes[2]["x1"] == pytest.approx(math.log2(limits["max"]), abs=1e-12)
    counters = outputs[TEXT_OUTPUTS - 1]
    assert counters.startswith("Gradient entries in float8_e5m2")
    note = "float8: float8_e5m2 is the format of the gradient arriving at each matmul's output"
    assert note in counters


def test_magnitude_bands_move_when_the_compute_dtype_changes():
    bfloat16, _ = _bands("bfloat16")
    float16, _ = _bands("float16")
    # float16's normal range ends near 2^16, bfloat16's near 2^128; its subnormals reach 2^-24
    # against bfloat16's 2^-133, and half of each rounds to zero.
    assert bfloat16[2]["x1"] == pytest.approx(math.log2(FORMATS["bfloat16"]["max"]), abs=1e-12)
    assert float16[2]["x1"] == pytest.approx(math.log2(FORMATS["float16"]["max"]), abs=1e-12)
    assert float16[2]["x1"] < 16 < 127 < bfloat16[2]["x1"] < 128
    assert float16[1]["x0"] == -25 and bfloat16[1]["x0"] == -134
    assert float16[1]["x1"] == -14 and bfloat16[1]["x1"] == -126
