"""Nothing a visitor can pick is locked out: every endpoint x model x recipe answers at the
page's defaults, through the launched app (raw HTTP, as any client sends it).

A training run takes RUN_STEPS steps here instead of the default 200 (which the cost model
accepts: tests/core/test_compile_cost.py), so the run is short; it compiles the same model,
recipe and batch as a default run (its buffers hold 8 steps instead of 256). Compiling is
nearly all of this module's time: 23 min cold on a 2-vCPU machine shared with other suites
(load 17-21); the suite's compilation cache on disk (tests/conftest.py) reads the programs
back on a later run.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from http_calls import FIELDS, attempt, visitor
from playground.core.models import MODELS
from playground.core.policy import COMPUTE_DTYPES
from playground.core.settings import defaults

RUN_STEPS = 8
ENDPOINTS = ("step", "dynamics", "sweep")
# The first call of a block-scaled MLP's training run compiles for tens of seconds on a busy
# 2-vCPU machine.
CALL_TIMEOUT = 300.0


def _inputs(endpoint: str, model: str, dtype: str) -> list[Any]:
    values = defaults() | {"seed": 0, "data": None, "downloads": False, "steps": RUN_STEPS}
    values |= {"model": model, "compute_dtype": dtype}
    values["model_seed"] = values.pop("seed")
    return [values[name] for name in FIELDS[endpoint]]


def _configs(payload: Any) -> list[dict[str, Any]]:
    """Every ``config`` dict in an answer's outputs (the JSON summaries)."""
    if isinstance(payload, dict):
        found = [payload["config"]] if isinstance(payload.get("config"), dict) else []
        return found + [c for value in payload.values() for c in _configs(value)]
    if isinstance(payload, list):
        return [c for value in payload for c in _configs(value)]
    return []


def _numbers(payload: Any) -> list[float]:
    """Every number in an answer's JSON outputs."""
    if isinstance(payload, bool):
        return []
    if isinstance(payload, int | float):
        return [float(payload)]
    if isinstance(payload, dict):
        return [x for value in payload.values() for x in _numbers(value)]
    if isinstance(payload, list):
        return [x for value in payload for x in _numbers(value)]
    return []


@pytest.mark.parametrize(
    ("endpoint", "model", "dtype"), list(itertools.product(ENDPOINTS, MODELS, COMPUTE_DTYPES))
)
def test_every_default_combination_answers(app_url, endpoint, model, dtype):
    who = visitor(f"198.51.100.{1 + ENDPOINTS.index(endpoint)}")  # one heavy run each
    answer = attempt(app_url, endpoint, _inputs(endpoint, model, dtype), who, timeout=CALL_TIMEOUT)
    assert answer.kind == "complete", answer.message
    configs = _configs(answer.payload)
    assert configs, "a JSON summary with its settings"
    for config in configs:
        assert (config["model"], config["compute_dtype"]) == (model, dtype)
        assert (config["n"], config["d_in"], config["d_out"]) == (256, 64, 16)
    # strict JSON: every number a finite one (an overflow is reported as text, never NaN)
    assert all(math.isfinite(x) for x in _numbers(answer.payload))
