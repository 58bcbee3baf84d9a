"""The per-parameter error ranking: a parameter whose float32 gradient is (near) zero is ranked
by its absolute error over its layer's gradient norm, never by a relative error over almost
nothing; the scores are recomputed here in float64 numpy from the step's own arrays."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

from playground.core.settings.settings import StepConfig
from playground.core.step.error_ranking import NEAR_ZERO, error_ranking
from playground.core.step.report import run_report
from playground.sections.step.summary import summarize


def _param(name, float32, mixed):
    return SimpleNamespace(
        name=name, float32_grads=np.asarray(float32, np.float32), mixed_grads=np.asarray(mixed)
    )


def test_a_near_zero_gradient_is_scored_against_its_layer():
    kernel = _param("key.kernel", [3.0, 4.0], [3.0, 4.5])  # relative 0.1
    bias = _param("key.bias", [1e-6], [2e-3])  # relative 2000; against the layer 4e-4
    other = _param("value.kernel", [1.0, 0.0], [1.02, 0.0])  # relative 0.02
    ranking = error_ranking([bias, other, kernel])
    assert [entry.name for entry in ranking] == ["key.kernel", "value.kernel", "key.bias"]
    scored = {entry.name: entry for entry in ranking}
    layer = math.sqrt(3.0**2 + 4.0**2 + np.float32(1e-6) ** 2)
    assert scored["key.bias"].by == "layer"
    assert scored["key.bias"].score == pytest.approx((2e-3 - np.float32(1e-6)) / layer)
    assert scored["key.kernel"].by == "relative" and scored["key.kernel"].score == pytest.approx(
        0.5 / 5.0
    )


def test_a_whole_zero_layer_scores_its_error_as_inf_and_ranks_first():
    ranking = error_ranking([_param("a.kernel", [1.0], [1.5]), _param("b.bias", [0.0], [1e-3])])
    assert ranking[0].name == "b.bias" and ranking[0].score == math.inf
    assert error_ranking([_param("c.bias", [0.0], [0.0])])[0].score == 0.0


@pytest.mark.slow
def test_the_transformers_key_bias_does_not_lead_the_ranking():
    """Softmax ignores a shift of every key, so the key bias's exact gradient is 0: in float32 it
    is rounding noise, near zero against its layer, and its relative error is huge."""
    report = run_report(StepConfig(model="transformer", compute_dtype="bfloat16"))
    summary = summarize(report)
    params = report.params
    key = params["attention.key.bias"]
    layer = math.sqrt(
        sum(
            float(np.sum(np.square(p.float32_grads.astype(np.float64))))
            for name, p in params.items()
            if name.startswith("attention.key.")
        )
    )
    own = float(np.linalg.norm(key.float32_grads.astype(np.float64)))
    error = float(np.linalg.norm(key.mixed_grads.astype(np.float64) - key.float32_grads))
    assert own <= NEAR_ZERO * layer and error / own > 10  # relative error would mislead
    row = summary["params"]["attention.key.bias"]
    assert row["ranked_by"] == "layer"
    assert row["ranked_error"] == pytest.approx(error / layer, rel=1e-9)
    assert summary["error_ranking"][0] != "attention.key.bias"
    first = summary["params"][summary["error_ranking"][0]]
    assert first["ranked_error"] == max(r["ranked_error"] for r in summary["params"].values())
    assert any(
        "attention.key.bias has a float32 gradient near zero" in s for s in summary["reading"]
    )
