"""The magnitude chart (above the tabs), the "Precision lab" and "Training dynamics" tabs in real
headless Chromium."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from playwright.sync_api import expect
from test_accessibility import BLOCKING, axe_source, run_axe  # noqa: F401 (a fixture)
from test_browser import ARTIFACTS, TIMEOUT_MS

from browser_waits import wait_for_headline
from helpers import expected_headline, open_page, select_tab
from playground import StepConfig
from playground.core.formats.dtypes import DTYPES
from playground.core.runs.sweep import run_sweep
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import defaults
from playground.sections.dynamics.charts import (
    dynamics_loss_figure,
    lost_update_figure,
    scale_figure,
)
from playground.sections.dynamics.summary import dynamics_reading
from playground.sections.lab.block_list import DEFAULT_LIST
from playground.sections.lab.summary import sweep_reading
from playground.sections.lab.sweep_status import RERUN_LABEL
from reference import band_labels

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 1280, 900
MAGNITUDES_TITLE = "Gradient magnitudes against"
# log2 of each format's largest value, from its definition: (2 - 2^-mantissa) * 2^bias.
LOG2_MAX = {
    "bfloat16": math.log2((2 - 2.0**-7) * 2.0**127),  # ~127.994
    "float16": math.log2((2 - 2.0**-10) * 2.0**15),  # ~15.999
}
LOG2_SMALLEST_NORMAL = {"bfloat16": -126, "float16": -14}
BAND_LABELS = ["flushed to 0", "subnormal", "normal", "overflow"]
DYNAMICS_STEPS = 50

# The Plotly graph div whose layout title contains `title` (Plotly attaches `layout` to it):
# its shapes and annotations as laid out, plus where the annotation texts landed on screen.
CHART_JS = """
title => {
  const chart = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
    g => g.layout && g.layout.title && String(g.layout.title.text).includes(title));
  if (!chart || !chart._fullLayout || !chart.layout.shapes) return null;
  const box = r => ({left: r.left, right: r.right, top: r.top, bottom: r.bottom});
  const xaxis = chart._fullLayout.xaxis;
  const left = chart.getBoundingClientRect().left + chart._fullLayout._size.l;
  return {
    title: chart.layout.title.text,
    shapes: chart.layout.shapes.map(s => ({x0: s.x0, x1: s.x1})),
    shapePixels: chart.layout.shapes.map(s => [left + xaxis.l2p(s.x0), left + xaxis.l2p(s.x1)]),
    drawnShapes: chart.querySelectorAll('.shapelayer path').length,
    notes: Array.from(chart.querySelectorAll('.annotation-text')).map(
      t => ({text: t.textContent, ...box(t.getBoundingClientRect())})),
    chart: box(chart.getBoundingClientRect()),
  };
}
"""


def _magnitude_chart(page, old_normal_end: float | None = None) -> dict:
    """The magnitude chart once drawn (and, given ``old_normal_end``, once its bands moved)."""
    page.wait_for_function(
        f"([title, old]) => {{ const c = ({CHART_JS})(title);"
        " return c !== null && c.drawnShapes >= 4 && c.notes.length >= 4"
        " && (old === null || Math.abs(c.shapes[2].x1 - old) > 0.5); }",
        arg=[MAGNITUDES_TITLE, old_normal_end],
        timeout=TIMEOUT_MS,
    )
    return page.evaluate(CHART_JS, MAGNITUDES_TITLE)


def _overlap(a: dict, b: dict) -> bool:
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and (b["top"] < a["bottom"])
    )


def _check_bands(chart: dict, dtype: str) -> None:
    assert chart["title"] == f"Gradient magnitudes against {dtype}'s ranges"
    shapes = chart["shapes"]
    assert len(shapes) == 4
    # The normal band runs from the smallest normal to the largest finite value.
    assert shapes[2]["x0"] == pytest.approx(LOG2_SMALLEST_NORMAL[dtype], abs=0.01)
    assert shapes[2]["x1"] == pytest.approx(LOG2_MAX[dtype], abs=0.01)
    assert shapes[3]["x0"] == pytest.approx(LOG2_MAX[dtype], abs=0.01)
    notes = chart["notes"]
    assert [note["text"] for note in notes] == band_labels(dtype)
    # Each label is drawn inside the chart, centred on its band, and no two labels overlap.
    for note, (x0, x1) in zip(notes, chart["shapePixels"], strict=True):
        centre = (note["left"] + note["right"]) / 2
        assert centre == pytest.approx((x0 + x1) / 2, abs=3), note
        assert chart["chart"]["left"] <= note["left"] and note["right"] <= chart["chart"]["right"]
    for i, a in enumerate(notes):
        for b in notes[i + 1 :]:
            assert not _overlap(a, b), (dtype, a, b)


def test_magnitude_bands_follow_the_dtype_and_the_lab_sweep_finds_its_window(browser, app_url):
    page = open_page(browser, app_url, WIDTH, HEIGHT)
    try:
        # The magnitude chart sits above the tabs, drawn with the headline.
        bfloat16 = _magnitude_chart(page)
        _check_bands(bfloat16, "bfloat16")

        page.locator("#compute_dtype").get_by_role("radio", name="float16", exact=True).check()
        float16 = _magnitude_chart(page, old_normal_end=bfloat16["shapes"][2]["x1"])
        _check_bands(float16, "float16")
        assert bfloat16["shapes"][2]["x1"] == pytest.approx(128, abs=0.01)
        assert float16["shapes"][2]["x1"] == pytest.approx(16, abs=0.01)

        select_tab(page, "Precision lab")
        page.get_by_role("button", name="Sweep the loss scale").click()
        page.wait_for_function(
            "() => (document.querySelector('#sweep-reading')?.innerText || '').includes('window')",
            timeout=TIMEOUT_MS,
        )
        text = page.locator("#sweep-reading").inner_text()
        sweep = run_sweep(StepConfig(**(defaults() | {"compute_dtype": "float16"})))
        safe = sweep.safe_exponents
        assert f"2^{safe.min()} to 2^{safe.max()}" in text, text
        for sentence in sweep_reading(sweep):
            assert sentence in text, (sentence, text)
        page.wait_for_function(
            f"() => ({CHART_JS})('Loss-scale sweep (float16)') !== null", timeout=TIMEOUT_MS
        )

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "precision_lab.png"), full_page=True)
    finally:
        page.close()


def _visible_titles(page) -> list[str]:
    return page.evaluate(
        "() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".filter(g => g.offsetParent !== null && g.layout && g.layout.title)"
        ".map(g => String(g.layout.title.text))"
    )


def test_training_dynamics_tab_trains_and_draws_three_charts(browser, app_url):
    page = open_page(browser, app_url, WIDTH, HEIGHT)
    try:
        select_tab(page, "Training dynamics")
        before = _visible_titles(page)
        steps = page.locator("#steps input[type=number]")
        steps.fill(str(DYNAMICS_STEPS))
        steps.press("Tab")  # a slider's number box applies when left
        page.wait_for_function(
            "n => document.querySelector('#steps input[type=range]').value === String(n)",
            arg=DYNAMICS_STEPS,
            timeout=TIMEOUT_MS,
        )
        # The run's other controls, found by their field names, show the defaults it uses.
        mode = page.locator("#mode").get_by_role("radio", name=defaults()["mode"], exact=True)
        assert mode.is_checked()
        assert page.locator("#period input").input_value() == str(defaults()["period"])
        page.get_by_role("button", name="Train the three runs").click()
        page.wait_for_function(
            "n => (document.querySelector('#dynamics-reading')?.innerText || '')"
            ".includes(`Over ${n} steps`)",
            arg=DYNAMICS_STEPS,
            timeout=TIMEOUT_MS,
        )
        text = page.locator("#dynamics-reading").inner_text()
        dynamics = run_dynamics(
            StepConfig(**defaults()), DYNAMICS_STEPS, defaults()["mode"], defaults()["period"]
        )
        assert dynamics_reading(dynamics)[0] in text, text

        page.wait_for_function(
            "() => Array.from(document.querySelectorAll('.js-plotly-plot'))"
            ".filter(g => g.offsetParent !== null).length >= 4",
            timeout=TIMEOUT_MS,
        )
        new = [title for title in _visible_titles(page) if title not in before]
        assert len(new) == 3, new
        assert new[0] == "Loss over the steps"
        assert new[1].startswith("Lost-update meter")
        assert new[2] == "Loss scale over the steps (static scaling, mixed run)"
        # Each chart drew its lines (loss: 3 runs, meter: 2, scale: 1), not just its axes: a
        # path with at least one segment (L, or H / V for a flat or vertical one) per line of
        # the figure drawn in this process (a run that loses no update draws a flat line).
        lines = page.evaluate(
            "titles => titles.map(t => Array.from(Array.from("
            "document.querySelectorAll('.js-plotly-plot')).find(g => g.layout.title.text === t)"
            ".querySelectorAll('.scatterlayer path.js-line')).filter(p =>"
            " /[LHV]/.test(p.getAttribute('d') || '')).length)",
            new,
        )
        figures = (dynamics_loss_figure, lost_update_figure, scale_figure)
        expected = [
            sum(
                "lines" in trace.get("mode", "") and len(trace.get("y") or []) > 1
                for trace in draw(dynamics)["data"]
            )
            for draw in figures
        ]
        assert expected == [3, 2, 1] and lines == expected, (lines, expected)

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "training_dynamics.png"), full_page=True)
    finally:
        page.close()


# --- the inspector's bit rows -----------------------------------------------------------------


def _inspected(page) -> dict[str, dict[str, str]]:
    """The inspector's table: row label -> {format: cell}."""
    rows = page.evaluate(
        """() => Array.from(document.querySelectorAll('#inspection table tr')).map(
            r => Array.from(r.children).map(c => c.innerText.trim()))"""
    )
    return {row[0]: dict(zip(rows[0][1:], row[1:], strict=True)) for row in rows[1:]}


def _type(page, text: str, shown: str) -> None:
    """Type ``text`` and press Enter; wait until the table's first line names it as ``shown``."""
    box = page.locator("#inspect-number textarea, #inspect-number input").first
    box.fill(text)
    box.press("Enter")
    page.wait_for_function(
        """shown => {
            const line = (document.querySelector('#inspection p')?.innerText || '').trim();
            return line === `Typed: ${shown}` || line.startsWith(`Typed: ${shown},`);
        }""",
        arg=shown,
        timeout=TIMEOUT_MS,
    )


def _bit(page, dtype: str, position: int):
    """A bit's button, found as a screen reader names it ("0: float16 bit 0, mantissa; ...")."""
    return page.locator("#inspect-bits").get_by_role(
        "button", name=f": {dtype} bit {position},", exact=False
    )


def _value_of_bits(raw: int, dtype: str) -> float:
    """A format's bit pattern as its value, read by ml_dtypes / numpy here."""
    numpy_dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    return float(np.asarray(raw, f"uint{numpy_dtype.itemsize * 8}").view(numpy_dtype))


def test_pressing_a_bit_flips_it_and_inspects_the_new_pattern_in_every_format(browser, app_url):
    page = open_page(browser, app_url, WIDTH, HEIGHT)
    try:
        select_tab(page, "Precision lab")
        box = page.locator("#inspect-number textarea, #inspect-number input").first
        for dtype in DTYPES:  # the sign bit of each format's row: 1 becomes -1
            _type(page, "1", "1.0")
            width = 8 * np.dtype(getattr(ml_dtypes, dtype, dtype)).itemsize
            _bit(page, dtype, width - 1).click()
            expect(box).to_have_value(f"0x{_raw_of_minus_one(dtype):0{width // 4}x}:{dtype}")
            expect(page.locator("#inspection")).to_contain_text(f"the {dtype} bits of -1.0")
            stored = _inspected(page)["stored value"]
            assert {name: stored[name] for name in DTYPES} == {name: "-1" for name in DTYPES}

        # float16's lowest mantissa bit: 1 + 2^-10, shown as float16 stores it.
        _type(page, "1", "1.0")
        _bit(page, "float16", 0).click()
        expect(box).to_have_value("0x3c01:float16")
        expected = _value_of_bits(0x3C01, "float16")
        expect(page.locator("#inspection")).to_contain_text(f"bits of {expected!r}")
        assert _inspected(page)["stored value"]["float16"] == f"{expected:.9g}"
        # The pressed bit keeps the focus, so the keyboard can press it again: back to 1.
        page.wait_for_function(
            "() => document.activeElement?.dataset?.key === 'float16-0'", timeout=TIMEOUT_MS
        )
        page.keyboard.press("Enter")
        expect(box).to_have_value("0x3c00:float16")
        assert _inspected(page)["stored value"]["float16"] == "1"

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator("#inspect-bits").screenshot(path=str(ARTIFACTS / "inspector_bits.png"))

        # Typed but not yet inspected: a note names what the table shows, and the results dim.
        note = page.locator("#inspect-bits .inspect-stale")
        expect(note).to_be_hidden()
        box.fill("2")
        expect(note).to_be_visible()
        expect(note).to_contain_text("show 0x3c00:float16")
        assert _opacity(page, "#inspection") < 1
        page.locator("#inspect-bits").screenshot(path=str(ARTIFACTS / "inspector_not_updated.png"))
        box.press("Enter")
        expect(note).to_be_hidden(timeout=TIMEOUT_MS)
        page.wait_for_function(
            "() => getComputedStyle(document.querySelector('#inspection')).opacity === '1'"
        )
        assert _inspected(page)["stored value"]["float16"] == "2"
    finally:
        page.close()


def _peer_cast(value: float, dtype: str) -> float:
    """``value`` (a float32) as ml_dtypes casts it to ``dtype``: exact, one rounding."""
    with np.errstate(over="ignore", invalid="ignore"):
        return float(np.asarray(value, np.float32).astype(getattr(ml_dtypes, dtype)))


def test_the_block_formats_columns_flip_an_e2m1_bit_and_fit_a_phone(browser, app_url):
    page = open_page(browser, app_url, 390, 844)
    try:
        select_tab(page, "Precision lab")
        box = page.locator("#inspect-number textarea, #inspect-number input").first
        _type(page, "3", "3.0")
        stored = _inspected(page)["stored value"]
        for dtype in ("float4_e2m1fn", "float8_e8m0fnu"):  # 3 in E2M1; 4 in E8M0 (a tie, up)
            assert stored[dtype] == f"{_peer_cast(3.0, dtype):.9g}", dtype
        assert _inspected(page)["sign bit"]["float8_e8m0fnu"] == "none"
        # E2M1's sign bit (bit 3 of 4): 3 (0101) becomes -3 (1101).
        _bit(page, "float4_e2m1fn", 3).click()
        expect(box).to_have_value("0xd:float4_e2m1fn")
        expect(page.locator("#inspection")).to_contain_text("the float4_e2m1fn bits of -3.0")
        stored = _inspected(page)["stored value"]
        assert stored["float4_e2m1fn"] == f"{_value_of_bits(0xD, 'float4_e2m1fn'):.9g}" == "-3"
        assert stored["float8_e8m0fnu"] == "nan"  # no sign: a negative number is NaN
        # Its lowest bit: 1101 becomes 1100, -2.
        _bit(page, "float4_e2m1fn", 0).click()
        expect(box).to_have_value("0xc:float4_e2m1fn")
        assert _inspected(page)["stored value"]["float4_e2m1fn"] == "-2"
        # The list view: each recipe's scales and a row per typed value.
        blocks = page.locator("#inspect-blocks")
        expect(blocks.locator("table tr")).to_have_count(1 + len(DEFAULT_LIST.split(",")))
        expect(blocks).to_contain_text("mxfp8")
        expect(blocks).to_contain_text("tensor scale")
        numbers = page.locator("#inspect-list textarea, #inspect-list input").first
        numbers.fill("1, 2, 1000")
        numbers.press("Enter")
        expect(blocks.locator("table tr")).to_have_count(4, timeout=TIMEOUT_MS)
        # Nothing sticks out of the page; the tables scroll inside their own boxes.
        overflow = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, overflow
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        # The table scrolled to its last columns (the block formats') for the screenshot.
        page.evaluate("() => { document.querySelector('#inspection table').scrollLeft = 1e6; }")
        top = page.locator("#inspect-number").bounding_box()
        bottom = page.locator("#inspect-blocks").bounding_box()
        scroll = page.evaluate("() => scrollY")
        clip = {"x": 0, "y": top["y"] + scroll, "width": 390}
        clip["height"] = bottom["y"] + bottom["height"] + scroll - clip["y"]
        shot = ARTIFACTS / "inspector_block_formats.png"
        page.screenshot(path=str(shot), full_page=True, clip=clip)
    finally:
        page.close()


def _raw_of_minus_one(dtype: str) -> int:
    numpy_dtype = np.dtype(getattr(ml_dtypes, dtype, dtype))
    return int(np.asarray(-1.0).astype(numpy_dtype).view(f"uint{numpy_dtype.itemsize * 8}"))


def test_the_inspector_reads_nan_and_names_a_number_beyond_float64_on_a_phone(browser, app_url):
    page = open_page(browser, app_url, 390, 844)
    try:
        select_tab(page, "Precision lab")
        _type(page, "nan", "nan")
        stored = _inspected(page)["stored value"]
        assert {stored[name] for name in DTYPES} == {"nan"}
        assert stored["float4_e2m1fn"] == f"{_peer_cast(math.nan, 'float4_e2m1fn'):.9g}"  # no NaN
        _type(page, "65519.99998", "65519.99998")
        # Rounded once from the typed digits: float16 keeps its largest value, 65504.
        largest = float(ml_dtypes.finfo(np.float16).max)
        assert _inspected(page)["stored value"]["float16"] == f"{largest:.9g}"
        _type(page, "1e400", "1e400")
        expect(page.locator("#inspection")).to_contain_text("beyond float64's range")
        assert _inspected(page)["rounding error"]["float32"] == "inf"
        # The bit rows wrap on a phone: nothing sticks out of the page.
        overflow = page.evaluate("() => document.documentElement.scrollWidth - innerWidth")
        assert overflow <= 0, overflow
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator("#inspect-bits").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "inspector_phone_390.png"))
    finally:
        page.close()


# --- the sweep marked stale -----------------------------------------------------------------


def _opacity(page, selector: str) -> float:
    return page.evaluate(
        "s => Number(getComputedStyle(document.querySelector(s)).opacity)", selector
    )


def test_the_sweep_is_dimmed_under_a_banner_once_the_controls_differ(
    browser,
    app_url,
    axe_source,  # noqa: F811 (the fixture imported above)
):
    page = open_page(browser, app_url, WIDTH, HEIGHT)
    status = page.locator("#sweep-status")
    rerun = page.get_by_role("button", name=RERUN_LABEL)
    dtype = page.locator("#compute_dtype")
    try:
        select_tab(page, "Precision lab")
        page.get_by_role("button", name="Sweep the loss scale").click()
        page.wait_for_function(
            "() => (document.querySelector('#sweep-reading')?.innerText || '').includes('window')",
            timeout=TIMEOUT_MS,
        )
        expect(status).not_to_contain_text("Not updated")
        expect(rerun).to_be_hidden()
        assert _opacity(page, "#sweep-reading") == 1

        dtype.get_by_role("radio", name="float16", exact=True).check()
        expect(status).to_contain_text("Not updated", timeout=TIMEOUT_MS)
        text = status.inner_text()
        assert "ran with compute dtype = bfloat16" in text and "compute dtype = float16" in text
        expect(rerun).to_be_visible()
        page.wait_for_function(
            "() => Number(getComputedStyle(document.querySelector('#sweep-reading')).opacity) < 1"
        )
        assert _opacity(page, "#sweep-reading") < 1 and _opacity(page, "#sweep-status") == 1
        # The step's own results are current: the sweep's banner does not dim them.
        assert _opacity(page, "#headline") == 1
        # Dimmed, the sweep's text and the bit rows still pass axe-core's serious checks.
        blocking = [v for v in run_axe(page, axe_source) if v["impact"] in BLOCKING]
        assert blocking == [], blocking
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator("#sweep-results").screenshot(path=str(ARTIFACTS / "sweep_stale.png"))

        dtype.get_by_role("radio", name="bfloat16", exact=True).check()  # back: current again
        expect(status).not_to_contain_text("Not updated", timeout=TIMEOUT_MS)
        expect(rerun).to_be_hidden()

        dtype.get_by_role("radio", name="float16", exact=True).check()
        expect(rerun).to_be_visible(timeout=TIMEOUT_MS)
        wait_for_headline(page, expected_headline(compute_dtype="float16"))
        rerun.click()  # the rerun sweeps the controls' settings
        page.wait_for_function(
            f"() => ({CHART_JS})('Loss-scale sweep (float16)') !== null", timeout=TIMEOUT_MS
        )
        expect(status).not_to_contain_text("Not updated", timeout=TIMEOUT_MS)
        expect(rerun).to_be_hidden()
        page.wait_for_function(
            "() => Number(getComputedStyle(document.querySelector('#sweep-reading')).opacity) == 1"
        )
    finally:
        page.close()
