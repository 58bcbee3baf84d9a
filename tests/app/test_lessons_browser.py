"""Training lessons in headless Chromium: a lesson button sets every setting, selects the
Training dynamics tab, trains, and shows the run's reading and the lesson's checked claim."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect
from test_browser import ARTIFACTS, TIMEOUT_MS

from browser_waits import wait_for_headline
from playground.core.lessons import lesson as lesson_by_id
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.sections.dynamics.summary import dynamics_reading

pytestmark = pytest.mark.slow

RUN_TIMEOUT_MS = 3 * TIMEOUT_MS  # the lesson's run compiles its program the first time
READING_HAS = (
    "text => (document.querySelector('#dynamics-reading')?.innerText || '')"
    ".replace(/\\s+/g, ' ').includes(text)"
)


def test_the_float16_s1_lesson_trains_and_shows_its_claim_and_both_meter_counts(browser, app_url):
    lesson = lesson_by_id("train-float16-unscaled")
    config = lesson.config()
    # Computed here, from the core, not read back from the page.
    run = run_dynamics(config)
    claim = lesson.claim(run)
    assert claim.holds, claim.condition
    reading = dynamics_reading(run)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(TIMEOUT_MS)
    try:
        page.goto(app_url)
        wait_for_headline(page, f"{run_report(StepConfig()).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)
        page.get_by_role("tab", name="Training dynamics").click()
        page.locator(f"#lesson-{lesson.id}").click()
        page.wait_for_function(READING_HAS, arg=reading[0], timeout=RUN_TIMEOUT_MS)
        # The step above the tabs ran with the lesson's settings too.
        wait_for_headline(page, f"{run_report(config).mixed_new_loss:.7g}", TIMEOUT_MS)
        # The reading counts both kinds of lost update, with the run's numbers.
        for sentence in reading[2:4]:
            page.wait_for_function(READING_HAS, arg=sentence, timeout=TIMEOUT_MS)
        caption = page.locator("#training-lesson-caption")
        expect(caption).to_contain_text(lesson.label)
        text = " ".join(caption.inner_text().split())
        assert " ".join(claim.sentence.split()) in text
        # The controls say what the run was computed with.
        assert float(page.locator("#loss_scale input").first.input_value()) == 1.0
        expect(
            page.locator("#compute_dtype").get_by_role("radio", name="float16", exact=True)
        ).to_be_checked()
        assert page.locator("#steps input").first.input_value() == str(config.steps)
        # The shown run is the controls' run: no stale banner.
        page.wait_for_timeout(1000)  # any stale check the new settings start has answered
        expect(page.locator("#dynamics-status .stale-banner")).to_have_count(0)
        page.locator("#dynamics-results").scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / "training_lesson_float16_s1.png"))
        for width, height, name in ((1400, 1000, "desktop"), (390, 844, "phone")):
            page.set_viewport_size({"width": width, "height": height})
            page.locator("#training-lessons").scroll_into_view_if_needed()
            page.screenshot(path=str(ARTIFACTS / f"training_lessons_{name}.png"))
    finally:
        page.close()
