"""The block-scaling tab in headless Chromium, as a visitor meets it: the one-outlier lesson
runs MXFP8 on a batch with one outlier, brings the Block scaling tab into view and shows the
run's note (where the matmuls ran, the first layer's output errors, the lesson's claim) above
the map of block scales. The numbers are computed here: the errors and the scales of x in
float64 numpy with ml_dtypes' E4M3 (``block_reference``), the headline and the claim from the
core."""

from __future__ import annotations

import re

import numpy as np
import pytest
from block_reference import mxfp8, per_tensor_float8, relative_error, row_errors
from playwright.sync_api import expect
from test_browser import ARTIFACTS, TIMEOUT_MS

from browser_waits import wait_for_headline, wait_in_view
from playground.core.data.synthetic import make_batch
from playground.core.lessons import lesson as lesson_by_id
from playground.core.lessons.blocks import outlier_claim
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.ui.examples import LESSONS

pytestmark = pytest.mark.slow

RUN_TIMEOUT_MS = 3 * TIMEOUT_MS  # the lesson's first run compiles its programs
NOTE = "note-block-scaling"
NOTE_TEXT = f"() => (document.getElementById('{NOTE}')?.innerText || '').replace(/\\s+/g, ' ')"
# The visible scale map: its two heatmaps' z (rows of log2 scales; null for a blank block).
SCALE_MAPS = """() => {
  const chart = [...document.querySelectorAll('.js-plotly-plot')].find(g =>
    g.offsetParent !== null && g.layout && g.layout.title &&
    String(g.layout.title.text || g.layout.title).startsWith('Block scales (log2)'));
  return chart ? chart.data.map(t => [t.type, t.name, t.z]) : null;
}"""


def test_the_outlier_lesson_shows_the_block_tab_with_its_errors_and_scale_map(browser, app_url):
    lesson = lesson_by_id("block-outlier")
    assert lesson.claim_on is outlier_claim and lesson in LESSONS
    report = lesson.run()
    claim = lesson.claim(report)
    assert claim.holds, claim.condition
    x, _ = make_batch(report.config)
    kernel = report.kernel.before
    exact = x.astype(np.float64) @ kernel
    x_blocks, x_scales = mxfp8(x)
    outputs = (x_blocks @ mxfp8(kernel.T)[0].T, per_tensor_float8(x) @ per_tensor_float8(kernel))
    norms = [relative_error(out, exact) for out in outputs]
    medians = [float(np.median(row_errors(out, exact))) for out in outputs]
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(app_url)
        wait_for_headline(page, f"{run_report(StepConfig()).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        page.locator(f"#lesson-{lesson.id}").click()
        wait_for_headline(page, f"{report.mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        selected = page.locator("#sections").get_by_role("tab", selected=True)
        expect(selected).to_have_text(lesson.tab)
        page.wait_for_function(f"() => ({NOTE_TEXT})().includes('emulated')")
        wait_in_view(page, lesson.target)
        text = page.evaluate(NOTE_TEXT)
        # Where the matmuls ran, and the output errors in norm and row by row, to the 3
        # digits the note shows: per-tensor float8 is closer in norm (the outlier's row decides
        # it), MXFP8 row by row.
        assert "emulated" in text and "on cpu" in text, text
        number = r"([0-9]+(?:\.[0-9]+)?(?:e[+-][0-9]+)?)"
        in_norm = f"mxfp8 {number}; per-tensor float8 \\(E4M3, current scaling\\) {number}"
        by_row = f"relative errors\\): mxfp8 {number}; per-tensor float8 {number}"
        for pattern, expected in ((in_norm, norms), (by_row, medians)):
            found = re.search(pattern, text)
            assert found, (pattern, text)
            assert [float(n) for n in found.groups()] == pytest.approx(expected, rel=6e-3)
        assert norms[1] < norms[0] and medians[0] < medians[1]
        assert "The two rank them differently" in text
        caption = " ".join(page.locator("#example-caption").inner_text().split())
        assert " ".join(claim.sentence.split()) in caption
        # The scale map: x's block scales (one row of x per row, a block of 32 per column)
        # are numpy's MXFP8 exponents; the kernel's map beside it.
        page.wait_for_function(f"() => ({SCALE_MAPS})() !== null")
        maps = page.evaluate(SCALE_MAPS)
        assert [(kind, name) for kind, name, _ in maps] == [
            ("heatmap", "input x"),
            ("heatmap", "kernel"),
        ]
        np.testing.assert_array_equal(np.asarray(maps[0][2], np.float64), x_scales)
        kernel_rows = -(-kernel.shape[0] // 32)
        assert np.shape(maps[1][2]) == (kernel_rows, kernel.shape[1])
        page.locator(f"#{NOTE}").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "block_scaling_tab.png"))
        page.evaluate(
            "() => [...document.querySelectorAll('.js-plotly-plot')].filter(g => g.offsetParent)"
            ".pop().scrollIntoView({block: 'center'})"
        )
        page.screenshot(path=str(ARTIFACTS / "block_scale_map.png"))
    finally:
        page.close()
