"""Helpers shared by the test modules, written once (no test module imports another's private
names; tests/test_test_helpers.py checks it).

  step_report, dynamics_report  ``run_report`` and ``run_dynamics``, each run once per process
                                for the same arguments (settings are frozen, so hashable)
  report                        the fixture of the test module's REPORT_CONFIG's step report
  step_inputs                   an endpoint's positional inputs: the defaults with changes
  format_values                 every finite value >= 0 of a format of up to 16 bits, with its
                                bit pattern, read from ml_dtypes
  luminance, contrast           WCAG 2's relative luminance of an sRGB colour (channels 0-255)
                                and the contrast ratio of two colours
  hex_rgb                       a ``#rrggbb`` colour's channels
  open_page, select_tab         the page in Chromium, loaded at a viewport; a section tab opened
  expected_headline             the mixed new loss as the headline prints it, computed here
  examples                      a hypothesis test's example count in this tier
  covering_params               parametrize values, the few that cover every member in the quick
                                tier and the rest marked slow
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

# Loaded as a plugin (tests/conftest.py), before conftest's pytest_configure points JAX at the
# shared compilation cache: the package (and so JAX) is imported on first use, never here.


# Set by tests/conftest.py in the full tier (``pytest --full``); xdist's workers inherit it.
FULL_TIER_ENV = "PLAYGROUND_FULL_TESTS"


def examples(full: int) -> int:
    """A hypothesis test's example count: ``full`` in the full tier (``pytest --full``), a tenth
    of it, at least 5, in the quick one (tests/conftest.py)."""
    return full if os.environ.get(FULL_TIER_ENV) else max(5, full // 10)


def covering_params(values: Sequence[Any], members: Any, ids: Any = None) -> list[Any]:
    """``values`` as ``pytest.param``s: in order, each value that brings a member not yet seen
    (``members(value)``: the registry members it exercises) stays in the quick tier; every other
    one is marked ``slow``. So the quick tier runs each member at least once."""
    seen: set = set()
    params = []
    for value in values:
        new = set(members(value)) - seen
        seen |= new
        name = ids(value) if ids else None
        params.append(pytest.param(value, id=name, marks=() if new else pytest.mark.slow))
    return params


@functools.cache
def step_report(config: Any, data: Any = None) -> Any:
    """``run_report(config, data)``, run once per process."""
    from playground import run_report

    return run_report(config, data)


@functools.cache
def dynamics_report(config: Any, *args: Any, **kwargs: Any) -> Any:
    """``run_dynamics(config, ...)``, run once per process for the same arguments."""
    from playground.core.runs.train import run_dynamics

    return run_dynamics(config, *args, **kwargs)


@pytest.fixture(scope="module")
def report(request):
    """The step report of the requesting test module's REPORT_CONFIG (once per process)."""
    config = getattr(request.module, "REPORT_CONFIG", None)
    if config is None:
        raise AttributeError(f"{request.module.__name__} uses `report` but has no REPORT_CONFIG")
    return step_report(config)


def step_inputs(order: Sequence[str], **changes: Any) -> list[Any]:
    """The inputs named by ``order``, positionally: the defaults with ``changes``."""
    from playground.core.settings.settings import defaults

    values = defaults() | changes
    return [values[name] for name in order]


@functools.cache
def format_values(numpy_dtype: Any, bits: int) -> tuple[tuple[Fraction, int], ...]:
    """Every finite value >= 0 of a format of ``bits`` bits (at most 16) with its bit pattern,
    ascending: every pattern viewed through ml_dtypes' type ``numpy_dtype``, the sign bit clear
    (so +0 once, and each value once: two patterns of one sign are two values)."""
    storage = np.uint8 if bits <= 8 else np.uint16
    values = np.arange(2**bits, dtype=storage).view(numpy_dtype).astype(np.float64)
    kept = np.isfinite(values) & ~np.signbit(values)
    pairs = sorted(zip(values[kept].tolist(), np.flatnonzero(kept).tolist(), strict=True))
    return tuple((Fraction(value), raw) for value, raw in pairs)


def luminance(rgb: Sequence[float]) -> float:
    """WCAG 2's relative luminance of an sRGB colour (channels 0-255; any alpha ignored)."""
    linear = [c / 255 for c in rgb[:3]]
    linear = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in linear]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast(one: Sequence[float], other: Sequence[float]) -> float:
    """WCAG 2's contrast ratio of two sRGB colours: (lighter + 0.05) / (darker + 0.05)."""
    light, dark = sorted((luminance(one), luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def hex_rgb(color: str) -> tuple[int, int, int]:
    """The channels (0-255) of a ``#rrggbb`` colour."""
    return int(color[1:3], 16), int(color[3:5], 16), int(color[5:7], 16)


TIMEOUT_MS = 60_000  # a browser test's default wait


def open_page(browser, url: str, width: int, height: int):
    """A new page at ``url`` in a ``width`` x ``height`` viewport, once the load event's step
    has shown a chart and the mixed new loss."""
    page = browser.new_page(viewport={"width": width, "height": height})
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.locator(".js-plotly-plot").first.wait_for(state="visible")
    page.locator("#headline #mixed-new-loss").wait_for(state="visible")
    return page


def select_tab(page, name: str) -> None:
    """Open a section tab (the tabs wrap onto more rows on a narrow screen, never into a menu)."""
    page.locator("#sections").get_by_role("tab", name=name, exact=True).click()
    page.locator("#sections").get_by_role("tab", name=name, exact=True, selected=True).wait_for()
    page.wait_for_timeout(300)  # let the newly shown charts lay themselves out


def expected_headline(**changes: Any) -> str:
    """The mixed new loss as the headline prints it, computed in this process."""
    from playground import StepConfig
    from playground.core.settings.settings import defaults

    return f"{step_report(StepConfig(**(defaults() | changes))).mixed_new_loss:.7g}"


def unlinked(markdown: str) -> str:
    """``markdown`` without the glossary's links (their words kept) and torch's names beside
    them (``sections.route.glossary.linked`` adds both)."""
    words = re.sub(r'\[([^\]]+)\]\(#glossary "[^"]*"\)', r"\1", markdown)
    return re.sub(r" \(torch: [^)]*\)", "", words)


def _one_line(text: str) -> str:
    """``text`` with its line breaks (and the ``<sup>`` each line of a subtitle is set in) as
    spaces."""
    flat = text.replace("</sup><br><sup>", " ").replace("<br>", " ")
    return re.sub(r" +", " ", flat)


def one_line_legends(view):
    """A route chapter's view (``sections.route.view.ChapterView``) with each legend entry, its
    title and each note on one line, as written before the route broke long ones to fit a
    phone (``view.legend_name``, ``pictures.wrapped``)."""

    def joined(figure):
        if figure is None:
            return None
        data = [
            trace | {"name": _one_line(trace["name"])}
            if isinstance(trace.get("name"), str)
            else trace
            for trace in figure["data"]
        ]
        layout = dict(figure["layout"])
        title = layout.get("title")
        if isinstance(title, dict) and isinstance(title.get("text"), str):
            layout["title"] = title | {"text": _one_line(title["text"])}
        layout["annotations"] = [
            note | {"text": _one_line(note["text"])} for note in layout.get("annotations", [])
        ]
        return figure | {"data": data, "layout": layout}

    return dataclasses.replace(
        view, chart=joined(view.chart), payoff_chart=joined(view.payoff_chart)
    )


def plotly_sent(value: Any) -> dict[str, Any]:
    """The figure gr.Plot sends the browser for ``value`` (one of the app's chart values), as a
    dict; fails unless Gradio sends it as a Plotly chart."""
    import json

    import gradio as gr

    sent = gr.Plot().postprocess(value).model_dump()
    assert sent["type"] == "plotly", sent["type"]
    return json.loads(sent["plot"])
