"""The saturation sentence says what a plain cast makes of a value past each format's largest,
as ml_dtypes casts it (float4_e2m1fn clips, float8_e4m3fn gives NaN, float8_e5m2 inf)."""

import ml_dtypes
import numpy as np

from playground import StepConfig, run_report
from playground.sections.step.float8_summary import float8_sentences, past_largest


def _plain_cast_of_twice_the_largest(dtype) -> float:
    largest = float(ml_dtypes.finfo(dtype).max)
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.asarray(2 * largest, np.float64).astype(dtype))


def test_the_peer_casts_as_the_sentence_says():
    assert np.isnan(_plain_cast_of_twice_the_largest(ml_dtypes.float8_e4m3fn))
    assert np.isinf(_plain_cast_of_twice_the_largest(ml_dtypes.float8_e5m2))
    e2m1 = ml_dtypes.float4_e2m1fn
    assert _plain_cast_of_twice_the_largest(e2m1) == float(ml_dtypes.finfo(e2m1).max)


def test_per_tensor_float8_names_nan_and_inf():
    text = past_largest(("float8_e4m3fn", "float8_e5m2"))
    assert text == ", where a plain cast gives NaN in float8_e4m3fn or inf in float8_e5m2"


def test_e2m1_is_said_to_clip_as_its_plain_cast_does():
    assert past_largest(("float4_e2m1fn", "float4_e2m1fn")) == (
        ", as a plain cast to float4_e2m1fn does too"
    )
    mixed = past_largest(("float8_e4m3fn", "float4_e2m1fn"))
    assert mixed == (
        ", where a plain cast gives NaN in float8_e4m3fn; a plain cast to float4_e2m1fn clips too"
    )


def test_the_nvfp4_reading_never_says_nan_or_inf():
    report = run_report(StepConfig(compute_dtype="nvfp4"))
    (saturated,) = [s for s in float8_sentences(report) if s.startswith("Saturated")]
    assert "NaN" not in saturated and " inf " not in saturated
    assert "as a plain cast to float4_e2m1fn does too" in saturated
