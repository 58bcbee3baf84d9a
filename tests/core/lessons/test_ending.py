"""The route's ending: every format on the default step, NVFP4 last. The errors are computed
here in float64 from each run's own gradients, the significant bits from ml_dtypes' finfo."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from playground.core.lessons import LESSONS
from playground.core.lessons.route import ROUTE
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.route.ending import formats_figure, summary
from playground.sections.route.view import chapter_view

FORMATS = ("float16", "bfloat16", "float8", "mxfp8", "fp8_block", "nvfp4")
# The finfo of the format each compute dtype stores its forward operands in.
ELEMENTS = {
    "float16": np.float16,
    "bfloat16": ml_dtypes.bfloat16,
    "float8": ml_dtypes.float8_e4m3fn,
    "mxfp8": ml_dtypes.float8_e4m3fn,
    "fp8_block": ml_dtypes.float8_e4m3fn,
    "nvfp4": ml_dtypes.float4_e2m1fn,
}


def _error(dtype: str) -> float:
    kernel = run_report(StepConfig(compute_dtype=dtype)).kernel
    mixed = kernel.mixed_grads.astype(np.float64)
    exact = kernel.float32_grads.astype(np.float64)
    return float(np.linalg.norm(mixed - exact) / np.linalg.norm(exact))


@pytest.fixture(scope="module")
def ending():
    chapter = ROUTE[-1]
    lesson = LESSONS[chapter.lesson]
    run = lesson.run()
    return chapter, run, lesson.claim(run)


def test_the_route_ends_on_every_format_with_nvfp4(ending):
    chapter, run, claim = ending
    assert chapter.sums_up and run.config.compute_dtype == "nvfp4"
    assert claim.holds, claim.condition
    errors = {dtype: _error(dtype) for dtype in FORMATS}
    assert claim.figures["errors"] == pytest.approx(errors, rel=1e-9)
    # The order the claim states, read from the errors computed here.
    float8 = [errors[name] for name in ("float8", "mxfp8", "fp8_block")]
    assert errors["float16"] < errors["bfloat16"] < min(float8) <= max(float8) < errors["nvfp4"]
    assert run.mixed_new_loss < run.mixed_initial_loss_in_float32
    assert len(claim.short.split()) <= 40 and "NVFP4" in claim.short


def test_the_ending_picture_draws_each_formats_error_and_bits(ending):
    chapter, run, claim = ending
    figure = formats_figure(chapter, {chapter.lesson: run}, claim)
    (bars,) = figure["data"]
    assert bars["x"] == list(FORMATS)
    assert bars["y"] == pytest.approx([_error(name) for name in FORMATS], rel=1e-9)
    for name, text in zip(FORMATS, bars["text"], strict=True):
        bits = ml_dtypes.finfo(ELEMENTS[name]).nmant + 1
        assert text.endswith(f"{bits} bits"), (name, text)
    assert figure["layout"]["yaxis"]["type"] == "log"


def test_the_ending_lists_what_every_chapter_showed(ending):
    chapter, run, claim = ending
    runs = {}
    for each in ROUTE:
        runs[each.lesson] = LESSONS[each.lesson].run() if each is not chapter else run
    listed = summary(runs)
    for number, each in enumerate(ROUTE[:-1], 1):
        assert f"{number}. **{each.title}**" in listed
    shown = chapter_view(chapter, runs)
    assert "What the route showed" in shown.payoff and shown.chart is not None
