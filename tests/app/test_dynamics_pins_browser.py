"""The Training dynamics tab in headless Chromium: two loss scales pinned side by side with a
legend naming them, results marked stale (banner, dimmed) once the controls change, and a
refused run that leaves the shown one in place, stale, under one error pop-up, its progress
shown in a box of its own."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from playwright.sync_api import expect
from test_browser import ARTIFACTS, TIMEOUT_MS

from browser_waits import wait_for_headline
from helpers import select_tab
from playground.core.runs.train import run_dynamics
from playground.core.step.report import run_report
from playground.sections.dynamics.summary import dynamics_reading
from playground.views.labels import control_label
from scenarios import TINY_FLOAT16

pytestmark = pytest.mark.slow

STEPS = 20
# float16 data near 2^-12 at S = 1: its gradients flush, so S = 2^10 gives other curves.
START = TINY_FLOAT16.replace(loss_scale=1.0, steps=STEPS)
QUERY = {
    name: START.to_dict()[name]
    for name in ("n", "d_in", "d_out", "input_scale", "target_scale", "compute_dtype")
} | {"loss_scale": 1, "steps": STEPS}
RUN_TIMEOUT_MS = 3 * TIMEOUT_MS  # a run compiles its program the first time

# The group titles of the loss chart's legend, as Plotly holds them.
LOSS_GROUPS = """() => {
  const chart = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
    g => g.layout && g.layout.title && String(g.layout.title.text) === 'Loss over the steps');
  if (!chart) return [];
  return [...new Set(chart.data.map(t => t.legendgrouptitle && t.legendgrouptitle.text)
    .filter(Boolean))];
}"""
OPACITY = "id => getComputedStyle(document.getElementById(id)).opacity"
# The names of the lost-update meter's traces of the first pin.
METER_PIN = """() => {
  const chart = Array.from(document.querySelectorAll('.js-plotly-plot')).find(
    g => g.layout && g.layout.title && String(g.layout.title.text).startsWith('Lost-update'));
  return chart ? chart.data.filter(t => t.legendgroup === 'pin0').map(t => t.name) : [];
}"""


def _train_and_wait(page, config) -> None:
    """Press Train and wait until the reading shows this run's first sentence."""
    first = dynamics_reading(run_dynamics(config))[0]
    page.get_by_role("button", name="Train the three runs").click()
    page.wait_for_function(
        "text => (document.querySelector('#dynamics-reading')?.innerText || '').includes(text)",
        arg=first,
        timeout=RUN_TIMEOUT_MS,
    )


def _shot(page, name: str) -> None:
    """A screenshot of the training results (banner, reading, notes, charts)."""
    results = page.locator("#dynamics-results")
    results.scroll_into_view_if_needed()
    results.screenshot(path=str(ARTIFACTS / name))


def _banner(page):
    return page.locator("#dynamics-status .stale-banner")


def test_two_pinned_loss_scales_are_named_in_the_legend_and_a_change_marks_the_run_stale(
    browser, app_url
):
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{app_url}?{urlencode(QUERY)}")
        wait_for_headline(page, f"{run_report(START).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        select_tab(page, "Training dynamics")
        _train_and_wait(page, START)
        expect(_banner(page)).to_have_count(0)

        page.get_by_role("button", name="Pin this run").click()
        expect(page.locator("#dynamics-notes")).to_contain_text("pin 1: same settings")

        # A preset changes the loss scale: the shown run is now stale, named with both values.
        page.locator("#loss-scale-presets").get_by_text("2^10", exact=True).click()
        expect(_banner(page)).to_contain_text(
            "computed with loss scale = 1; the controls now say loss scale = 1024"
        )
        expect(_banner(page)).to_contain_text("Train the three runs")
        assert float(page.evaluate(OPACITY, "dynamics-reading")) < 0.6  # dimmed
        assert float(page.evaluate(OPACITY, "dynamics-status")) == 1.0
        _shot(page, "dynamics_stale_loss_scale.png")

        second = START.replace(loss_scale=2.0**10)
        _train_and_wait(page, second)
        expect(_banner(page)).to_have_count(0)
        assert float(page.evaluate(OPACITY, "dynamics-reading")) == 1.0
        page.wait_for_function(f"() => ({LOSS_GROUPS})().length === 2", timeout=TIMEOUT_MS)
        assert sorted(page.evaluate(LOSS_GROUPS)) == [
            "pinned: loss scale = 1",
            "this run: loss scale = 1024",
        ]
        # The legend on the page shows both names.
        legend = page.locator("#dynamics-results .js-plotly-plot .legend").first
        expect(legend).to_contain_text("pinned: loss scale = 1")
        expect(legend).to_contain_text("this run: loss scale = 1024")
        expect(page.locator("#dynamics-notes")).to_contain_text("pin 1: loss scale = 1")
        # The meter draws the pinned S = 1 run's flushed updates beside this run's, not a
        # legend entry saying the curves are the same.
        meter = page.evaluate(METER_PIN)
        assert "float32 masters: gradient flushed to 0" in meter, meter
        assert "same curves as this run" not in meter
        _shot(page, "dynamics_pins.png")

        # Another compute dtype after the run: stale again, naming the dtype it was computed with.
        page.locator("#compute_dtype").get_by_role("radio", name="bfloat16", exact=True).check()
        expect(_banner(page)).to_contain_text(
            "computed with compute dtype = float16; the controls now say compute dtype = bfloat16"
        )
        _shot(page, "dynamics_stale_dtype.png")
        page.set_viewport_size({"width": 390, "height": 844})  # a phone
        page.wait_for_timeout(500)  # the charts lay themselves out again
        _shot(page, "dynamics_stale_dtype_phone.png")
        page.set_viewport_size({"width": 1400, "height": 1000})

        page.get_by_role("button", name="Clear pins").click()
        page.wait_for_function(f"() => ({LOSS_GROUPS})().length === 0", timeout=TIMEOUT_MS)
    finally:
        page.close()


def test_a_nan_curve_ends_with_a_marker_naming_its_step_and_cause(browser, app_url):
    # float16's largest value is 65504: at S = 2^16 the scaled gradients of data of scale 1
    # leave it, and the mixed run's loss is NaN from its first update on.
    config = START.replace(input_scale=1.0, target_scale=1.0, loss_scale=2.0**16, steps=10)
    run = run_dynamics(config)
    step = next(k for k, loss in enumerate(run.mixed_loss.tolist()) if loss != loss)
    query = QUERY | {"input_scale": 1, "target_scale": 1, "loss_scale": 2**16, "steps": 10}
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{app_url}?{urlencode(query)}")
        wait_for_headline(page, f"{run_report(config).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        select_tab(page, "Training dynamics")
        _train_and_wait(page, config)
        label = f"NaN at step {step}: float16 step not finite (S = 2^16)"
        marker = page.locator("#dynamics-results .js-plotly-plot .textpoint", has_text=label)
        expect(marker).to_have_count(1)
        expect(page.locator("#dynamics-notes")).to_contain_text(
            f"The mixed run's loss is NaN from step {step}: the float16 step at loss scale "
            "S = 2^16 was not finite"
        )
        _shot(page, "dynamics_nan_marker.png")
    finally:
        page.close()


def test_a_run_on_an_upload_is_current_until_the_upload_goes(browser, app_url, tmp_path):
    import numpy as np

    from playground.core.data.user_data import UserData

    rows = np.random.default_rng(5).standard_normal((24, 4)).round(4)
    path = tmp_path / "four.csv"
    path.write_text("\n".join(",".join(repr(float(v)) for v in row) for row in rows) + "\n")
    # At the defaults (D_out = 16 > 4 columns) the last column is the one target.
    shapes = {"n": 24, "d_in": 3, "d_out": 1}
    data = UserData(path.name, rows[:, :3].astype(np.float32), rows[:, 3:].astype(np.float32))
    config = START.replace(**shapes, input_scale=1.0, target_scale=1.0, steps=STEPS)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{app_url}?{urlencode(QUERY | {'input_scale': 1, 'target_scale': 1})}")
        page.locator("#headline #mixed-new-loss").wait_for(state="visible")
        with page.expect_file_chooser() as chooser:
            page.locator("#data").get_by_text("Click to Upload").click()
        chooser.value.set_files(str(path))
        wait_for_headline(page, f"{run_report(config, data).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        select_tab(page, "Training dynamics")
        first = dynamics_reading(run_dynamics(config, data=data))[0]
        page.get_by_role("button", name="Train the three runs").click()
        page.wait_for_function(
            "t => (document.querySelector('#dynamics-reading')?.innerText || '').includes(t)",
            arg=first,
            timeout=RUN_TIMEOUT_MS,
        )
        # The controls show the file's shapes, which the run used: nothing is stale.
        page.wait_for_timeout(1000)  # any stale check after the run has answered
        expect(_banner(page)).to_have_count(0)
        # The upload removed: the run was computed with the file, the controls say synthetic.
        page.locator("#data").get_by_role("button", name="Clear").click()
        expect(_banner(page)).to_contain_text(
            "computed with data = four.csv; the controls now say data = synthetic"
        )
    finally:
        page.close()


# Watches, from before a click, whether the progress box ever showed Gradio's progress and
# whether the run's progress or an error status ever covered the shown run's results.
WATCH_PROGRESS = """() => {
  window.sawProgress = false; window.coveredResults = false;
  new MutationObserver(() => {
    const box = document.querySelector('#dynamics-progress')?.innerText ?? '';
    if (/processing|queue/.test(box)) window.sawProgress = true;
    const results = document.querySelector('#dynamics-results');
    if (results && (results.querySelector('.error') || /processing/.test(results.innerText)))
      window.coveredResults = true;
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
# Notes when the headline shows the step's progress (a commit is running).
WATCH_HEADLINE = """() => {
  window.headlineBusy = false;
  new MutationObserver(() => {
    if (/processing/.test(document.querySelector('#headline')?.innerText ?? ''))
      window.headlineBusy = true;
  }).observe(document.body, {subtree: true, childList: true, characterData: true});
}"""
# A shape whose cap on steps (61 today) is far below the slider's largest value, 1000.
REFUSED_SHAPE = {"n": 4096, "d_in": 1024, "d_out": 64}


def test_a_refused_run_keeps_the_shown_run_stale_under_one_error(browser, app_url):
    assert START.replace(**REFUSED_SHAPE, steps=1).max_steps < 1000
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(f"{app_url}?{urlencode(QUERY)}")
        wait_for_headline(page, f"{run_report(START).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        select_tab(page, "Training dynamics")
        page.evaluate(WATCH_PROGRESS)
        _train_and_wait(page, START)
        # The run's progress showed in its own box, never over the results.
        assert page.evaluate("() => window.sawProgress")
        assert not page.evaluate("() => window.coveredResults")
        reading = page.locator("#dynamics-reading").inner_text()
        charts = page.locator("#dynamics-results .js-plotly-plot")
        expect(charts).to_have_count(3)

        for name, value in REFUSED_SHAPE.items():
            # The step commits at the new shape: the next field is typed once it has answered.
            page.evaluate(WATCH_HEADLINE)
            box = page.locator(f"#{name} input[type=number]")
            box.fill(str(value))
            box.press("Enter")
            page.wait_for_function(
                "() => window.headlineBusy && !/processing/.test("
                "document.querySelector('#headline').innerText)",
                timeout=RUN_TIMEOUT_MS,
            )
            expect(_banner(page)).to_contain_text(f"{control_label(name)} = {value}")
        steps = page.locator("#steps input[type=number]")
        steps.fill("1000")
        steps.press("Enter")
        page.evaluate(WATCH_PROGRESS)
        page.get_by_role("button", name="Train the three runs").click()
        errors = page.locator(".toast-body.error")
        expect(errors.first).to_contain_text("steps (training steps) must be an integer in [1, ")
        page.wait_for_timeout(1500)  # a second pop-up, had there been one, would be up by now
        expect(errors).to_have_count(1)
        # The shown run stays as it was, stale, naming every setting that differs.
        expect(charts).to_have_count(3)
        assert page.locator("#dynamics-reading").inner_text() == reading
        assert not page.evaluate("() => window.coveredResults")
        expect(_banner(page)).to_contain_text(
            "computed with batch rows N = 32, input width D_in = 8, output width D_out = 4, "
            "training steps = 20; the controls now say batch rows N = 4096, input width D_in = "
            "1024, output width D_out = 64, training steps = 1000"
        )
        _shot(page, "dynamics_refused_run.png")
    finally:
        page.close()
