"""The page as a visitor meets it (issue 11), in real headless Chromium.

Runs on commit (Enter, leaving a field, releasing a slider, picking a choice), a notice under a bad
field with the old results dimmed under a banner, examples applied as one run with a computed
caption, the power-of-two loss-scale control kept in sync with the presets, the key figure above
the fold, every tab reachable on a phone, charts drawn only for the open tab, and the inspector
reading typed text. Every expected number is computed in this process (run_report, numpy).

One desktop page serves most tests (reloaded where a test needs the defaults); screenshots at
desktop, phone width and in the dark theme go to tests/artifacts/.
"""

from __future__ import annotations

import json
import math
import re
import urllib.request
from dataclasses import dataclass, field

import numpy as np
import pytest
from playwright.sync_api import expect
from test_browser import ARTIFACTS, TIMEOUT_MS

from browser_waits import (
    field_message,
    headline,
    navigate,
    wait_for_headline,
    wait_for_notice_or_headline,
    wait_in_view,
)
from helpers import contrast, expected_headline
from playground import StepConfig, run_report
from playground.core.lessons import lesson as lesson_by_id
from playground.core.settings.settings import ConfigError, check_setting, defaults, settings
from playground.sections.lab import tab as lab_tab
from playground.sections.step import tab as step_tab
from playground.ui.examples import caption_text
from playground.ui.page_events import LOSS_SCALE_PRESETS
from playground.ui.sections import SECTIONS
from playground.views.labels import control_label

pytestmark = pytest.mark.slow

DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
# Long enough for any event a keystroke would have sent to leave the page (no timing asserted).
SETTLE_MS = 600
# The one batch size the tests move to (each new shape compiles once per server).
FRESH_N = 300
# Every section's tabs, in the registry's order; the contract's two labels among them.
SECTION_TABS = [label for section in SECTIONS for label in section.tabs]
assert {"Precision lab", "Training dynamics"} <= set(SECTION_TABS)

# Every distinct (mixed new loss | compute dtype) the headline shows, in order, from page load on.
RECORD_HEADLINES = """
window.seen = [];
new MutationObserver(() => {
    const loss = document.querySelector('#headline #mixed-new-loss');
    const headline = document.querySelector('#headline');
    if (!loss || !headline) return;
    const dtype = (headline.innerText.match(/mixed (\\w+)/) || [])[1];
    const shown = loss.textContent.trim() + '|' + dtype;
    if (window.seen[window.seen.length - 1] !== shown) window.seen.push(shown);
}).observe(document, {subtree: true, childList: true, characterData: true});
"""
# Titles of the Plotly charts that hold data (drawn, visible or not).
DRAWN_TITLES = """() => Array.from(document.querySelectorAll('.js-plotly-plot'))
    .filter(g => g.data && g.data.length > 0 && g.layout && g.layout.title)
    .map(g => String(g.layout.title.text))"""
BOX_JS = """selector => { const e = document.querySelector(selector); if (!e) return null;
    const r = e.getBoundingClientRect();
    return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; }"""


@dataclass
class Session:
    """A page and the queue events it sent (their fn_index, in order, the component id of
    the trigger each was sent for, and each gathered commit's number for the page's order)."""

    page: object
    url: str
    joins: list[int] = field(default_factory=list)
    senders: list[int | None] = field(default_factory=list)
    numbers: list[object] = field(default_factory=list)


def open_session(browser, url: str, viewport: dict) -> Session:
    page = browser.new_page(viewport=viewport)
    page.set_default_timeout(TIMEOUT_MS)
    page.add_init_script(RECORD_HEADLINES)
    session = Session(page, url)

    def record(request) -> None:
        if "/queue/join" in request.url and request.post_data:
            payload = json.loads(request.post_data)
            session.joins.append(payload.get("fn_index"))
            session.senders.append(payload.get("trigger_id"))
            data = payload.get("data") or [None]
            if isinstance(data[0], dict) and "values" in data[0]:  # a gathered commit's box
                session.numbers.append(data[0].get("sent"))

    page.on("request", record)
    return session


def load_page(session: Session, query: str = "", charts: bool = True) -> None:
    """(Re)load the page and wait for the default results: the headline, then (``charts``) the
    first two charts."""
    page = session.page
    navigate(page, session.url + query)
    wait_for_headline(page, expected_headline())
    if charts:
        page.wait_for_function(f"n => ({DRAWN_TITLES})().length >= n", arg=2, timeout=TIMEOUT_MS)
    session.joins.clear()
    session.senders.clear()
    session.numbers.clear()


@pytest.fixture(scope="module")
def desk(browser, app_url):
    session = open_session(browser, app_url, DESKTOP)
    load_page(session)
    yield session
    session.page.close()


def _message(name: str, value) -> str:
    """The core's message for an invalid value of field ``name``."""
    with pytest.raises(ConfigError) as caught:
        check_setting(name, value)
    return str(caught.value)


def _step_events(app_url: str) -> dict[int, str]:
    """fn_index -> what triggers it, for every event that runs the step from the page: a
    settings control, the loss-scale controls or an example button (from the app's config)."""
    with urllib.request.urlopen(app_url + "config", timeout=30) as response:
        config = json.load(response)
    elem_ids = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    runs = set(settings()) | {"data", "loss-scale-exponent", "loss-scale-presets"}
    by_id = {dependency["id"]: dependency for dependency in config["dependencies"]}

    def named(dependency) -> list[str]:
        names = [elem_ids.get(target) for target, _ in dependency["targets"] if target is not None]
        # A commit's server event follows the browser-only event its controls trigger
        # (ui.gathered_inputs): its triggers are that event's.
        before = dependency.get("trigger_after")
        if not names and before is not None and not by_id[before].get("backend_fn", True):
            return named(by_id[before])
        return [n for n in names if n and (n in runs or n.startswith("lesson-"))]

    return {
        dependency["id"]: ",".join(sorted(set(named(dependency))))
        for dependency in config["dependencies"]
        if named(dependency) and dependency.get("backend_fn", True)
    }


def _elem_ids(app_url: str) -> dict[int, str | None]:
    """component id -> elem_id, from the app's config."""
    with urllib.request.urlopen(app_url + "config", timeout=30) as response:
        config = json.load(response)
    return {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}


def _checked(page, elem_id: str) -> str | None:
    return page.evaluate(
        "id => (document.querySelector(`#${id} input:checked`) || {}).value || null", elem_id
    )


def _fmt(value: float) -> str:
    """A number as a gr.Number shows it (2048.0 -> "2048", 0.1 -> "0.1")."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else repr(value)


# -- what is shown after load --------------------------------------------------------------------


def test_the_headline_counts_and_magnitude_figure_fit_the_first_screen(desk):
    # The first screen is the route's (test_route_browser); one scroll past it, the workspace's
    # first screen holds the key figure whole.
    page = desk.page  # as loaded: nothing clicked yet
    assert page.evaluate("scrollY") == 0
    page.evaluate("() => document.getElementById('workspace').scrollIntoView()")
    boxes = {
        selector: page.evaluate(BOX_JS, selector)
        for selector in ("#headline", "#magnitudes", "#magnitude-figure .js-plotly-plot")
    }
    outside = {
        selector: box
        for selector, box in boxes.items()
        if box is None
        or box["top"] < 0
        or box["left"] < 0
        or box["bottom"] > DESKTOP["height"]
        or box["right"] > DESKTOP["width"]
    }
    page.evaluate("() => window.scrollTo(0, 0)")
    assert not outside, f"not fully visible at {DESKTOP}: {outside}"


def test_after_load_only_the_key_figure_and_the_open_tab_are_drawn(desk):
    page = desk.page
    report = run_report(StepConfig(**defaults()))
    assert headline(page) == f"{report.mixed_new_loss:.7g}"
    titles = [
        draw(report)["layout"]["title"]["text"]
        for draw in (step_tab.FIGURES["loss_plot"], lab_tab.magnitude_histogram)
    ]
    # The counts above the figure are the report's own.
    counts = page.locator("#magnitudes").inner_text()
    for when in ("before scaling", "after scaling"):
        for n in report.magnitudes[when].values():
            assert f"({n:,})" in counts, (when, n, counts)
    # Only the open tab's chart and the magnitude figure are drawn; the other tabs wait.
    assert sorted(page.evaluate(DRAWN_TITLES)) == sorted(titles)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "page_desktop_1400x1000.png"))
    page.screenshot(path=str(ARTIFACTS / "page_desktop_full.png"), full_page=True)

    page.locator("#sections").get_by_role("tab", name="Gradient histograms", exact=True).click()
    page.wait_for_function(
        f"() => ({DRAWN_TITLES})().some(t => t.startsWith('Gradient histograms'))",
        timeout=TIMEOUT_MS,
    )
    histogram = page.locator(".js-plotly-plot").filter(has_text="Gradient histograms")
    assert histogram.first.is_visible()
    titles = page.evaluate(DRAWN_TITLES)
    assert len(titles) == 3, titles


def test_plotly_is_asked_for_once_by_gradios_own_import(desk):
    """Gradio's front end loads its Plotly chunk itself when the first chart's data arrives:
    the page adds no request for it (no file name of Gradio's build is read), one per load."""
    sent: list[str] = []

    def record(request) -> None:
        if "/PlotlyPlot-" in request.url:
            sent.append("plotly")
        elif "/queue/join" in request.url:
            sent.append("join")

    desk.page.on("request", record)
    try:
        load_page(desk)  # the URL read, the commit, then the charts: three joins
    finally:
        desk.page.remove_listener("request", record)
    assert sent.count("plotly") == 1, sent
    assert sent.index("plotly") > sent.index("join"), sent  # asked for with the data, not before


_LEGEND_JS = """() => { const g = document.querySelector('#magnitude-figure .js-plotly-plot');
    const box = e => { const r = e.getBoundingClientRect();
        return {left: r.left, top: r.top, right: r.right, bottom: r.bottom}; };
    return {title: box(g.querySelector('.g-xtitle text')),
            items: Array.from(g.querySelectorAll('.legend .traces')).map(box)}; }"""


def _axis_title_clears_legend(page) -> None:
    """The magnitude chart's x-axis title and its legend entries do not overlap."""
    boxes = page.evaluate(_LEGEND_JS)
    title = boxes["title"]
    hits = [
        item
        for item in boxes["items"]
        if item["left"] < title["right"]
        and title["left"] < item["right"]
        and item["top"] < title["bottom"]
        and title["top"] < item["bottom"]
    ]
    assert not hits, f"axis title {title} overlaps legend entries {hits}"


def test_the_magnitude_chart_axis_title_clears_its_legend(desk):
    _axis_title_clears_legend(desk.page)


# -- runs on commit ------------------------------------------------------------------------------


def test_a_number_applies_on_enter_or_on_leaving_it_never_per_keystroke(desk):
    page = desk.page
    load_page(desk, charts=False)
    before = headline(page)
    lr = page.locator("#lr input")
    lr.fill("")
    lr.press_sequentially("0.5")
    page.wait_for_timeout(SETTLE_MS)
    step_runs = set(_step_events(desk.url))
    assert [j for j in desk.joins if j in step_runs] == []  # nothing was sent while typing
    assert headline(page) == before

    lr.press("Enter")
    wait_for_headline(page, expected_headline(lr=0.5))

    lr.fill("0.25")
    page.locator("#intro").click()  # leaving the field commits it
    wait_for_headline(page, expected_headline(lr=0.25))
    shown = [before, expected_headline(lr=0.5), expected_headline(lr=0.25)]
    assert page.evaluate("window.seen") == [f"{loss}|bfloat16" for loss in shown]


def test_a_slider_box_applies_on_leaving_it_or_on_enter(desk):
    """(Releasing a dragged handle is checked on the loss-scale exponent, below.)"""
    page = desk.page
    load_page(desk, charts=False)
    step_events = _step_events(desk.url)
    box = page.locator("#n input[type=number]")
    box.fill(str(FRESH_N))
    page.wait_for_timeout(SETTLE_MS)
    assert [j for j in desk.joins if j in step_events] == []  # typing alone sends nothing
    box.press("Tab")
    wait_for_headline(page, expected_headline(n=FRESH_N))

    box.fill(str(defaults()["n"]))
    box.press("Enter")
    wait_for_headline(page, expected_headline())
    assert page.locator("#n input[type=range]").input_value() == str(defaults()["n"])


def test_arrow_keys_on_a_slider_then_leaving_it_apply_it(desk):
    page = desk.page
    load_page(desk, charts=False)
    track = page.locator("#n input[type=range]")
    track.focus()
    track.press("ArrowRight")
    track.press("Tab")
    page.wait_for_function(
        "n => document.querySelector('#n input[type=range]').value === String(n)",
        arg=defaults()["n"] + 1,
    )
    page.wait_for_timeout(SETTLE_MS)
    assert any(j in _step_events(desk.url) for j in desk.joins), "no run after the keyboard"
    wait_for_headline(page, expected_headline(n=defaults()["n"] + 1))


# Every clip-path of every chart whose url() names another document than this one: such a
# reference resolves to nothing, so the chart's bars and lines are no longer clipped to its axes.
STALE_CLIPS_JS = """() => {
    const here = location.href.split('#')[0];
    return Array.from(document.querySelectorAll('.js-plotly-plot [clip-path]'))
        .map(e => e.getAttribute('clip-path'))
        .filter(c => { const m = /url\\(['"]?([^'")#]*)#/.exec(c);
                       return m && m[1] && m[1] !== here; });
}"""


def test_charts_stay_clipped_after_the_url_is_rewritten(desk):
    page = desk.page
    load_page(desk)  # the charts drawn at the bare address
    # A setting that redraws no chart: only the address changes.
    page.locator("#sections").get_by_role("tab", name="Training dynamics", exact=True).click()
    steps = page.locator("#steps input[type=number]")
    steps.fill("50")
    steps.press("Tab")
    page.wait_for_function("() => new URLSearchParams(location.search).get('steps') === '50'")
    stale = page.evaluate(STALE_CLIPS_JS)
    # Then a commit updates the magnitude chart in place: its bars leave the axes (artifact).
    lr = page.locator("#lr input")
    lr.fill("0.5")
    lr.press("Enter")
    wait_for_headline(page, expected_headline(lr=0.5))
    # A viewport capture (an element capture resizes the page, and the resize redraws the charts).
    page.evaluate("document.getElementById('magnitude-figure').scrollIntoView()")
    page.wait_for_timeout(SETTLE_MS)
    page.screenshot(path=str(ARTIFACTS / "page_clip_after_commit.png"))
    assert not stale, f"{len(stale)} clip-paths name another address than {page.url}: {stale[:2]}"


# -- a bad value: a notice, a banner, dimmed results, no pop-up ----------------------------------


def _stale(page) -> dict:
    return page.evaluate(
        """() => ({
          opacity: Array.from(document.querySelector('#results').children)
            .filter(c => c.id !== 'status' && c.offsetParent !== null)
            .map(c => getComputedStyle(c).opacity),
          status: document.querySelector('#status')
            ? getComputedStyle(document.querySelector('#status')).opacity : null,
        })"""
    )


def _expect_notice(page, name: str, message: str, shown_value: str) -> None:
    notice = field_message(page, name)
    expect(notice).to_be_visible(timeout=TIMEOUT_MS)
    expect(notice).to_contain_text(message, timeout=TIMEOUT_MS)
    banner = page.locator("#status .stale-banner")
    expect(banner).to_be_visible(timeout=TIMEOUT_MS)
    # The control is named by its label, as the page shows it (no code quotes, no API name).
    label = control_label(name)
    expect(banner).to_contain_text(
        f"Not updated: fix {label} (its message says why)", timeout=TIMEOUT_MS
    )
    expect(banner).to_contain_text(
        f"showing results for {label} = {shown_value}", timeout=TIMEOUT_MS
    )
    assert "`" not in banner.inner_text()
    stale = _stale(page)
    assert stale["opacity"] and set(stale["opacity"]) == {"0.45"}, stale
    assert stale["status"] == "1", stale
    assert page.locator(".toast-body").count() == 0  # no error pop-up


def _expect_current(page, expected: str) -> None:
    wait_for_headline(page, expected)
    expect(page.locator("#status")).to_be_hidden(timeout=TIMEOUT_MS)
    assert page.locator(".field-notice:visible, .field-invalid").count() == 0
    # Each field's help line is back where its message was.
    expect(page.locator("#lr .info-text")).to_contain_text("Allowed:", timeout=TIMEOUT_MS)
    assert set(_stale(page)["opacity"]) == {"1"}


def test_a_bad_value_is_named_under_its_field_and_the_old_results_are_marked(desk):
    page = desk.page
    load_page(desk, charts=False)
    default = expected_headline()
    # N first, with no other commit in flight (see the race test below).
    n = page.locator("#n input[type=number]")
    n.fill("1e40")
    n.press("Tab")
    _expect_notice(page, "n", _message("n", 1e40), str(defaults()["n"]))
    assert headline(page) == default
    n.fill(str(FRESH_N))
    n.press("Tab")
    _expect_current(page, expected_headline(n=FRESH_N))

    lr = page.locator("#lr input")
    lr.fill("-1")
    lr.press("Enter")
    _expect_notice(page, "lr", _message("lr", -1), _fmt(defaults()["lr"]))
    assert headline(page) == expected_headline(n=FRESH_N)
    page.screenshot(path=str(ARTIFACTS / "page_stale_desktop.png"))

    lr.fill("")  # a cleared field
    lr.press("Enter")
    _expect_notice(page, "lr", _message("lr", None), _fmt(defaults()["lr"]))

    lr.fill("0.3")
    lr.press("Enter")
    _expect_current(page, expected_headline(n=FRESH_N, lr=0.3))
    assert page.locator(".toast-body").count() == 0
    shown = [default, expected_headline(n=FRESH_N), expected_headline(n=FRESH_N, lr=0.3)]
    assert page.evaluate("window.seen") == [f"{loss}|bfloat16" for loss in shown]


# The two commits are sent a moment apart on two connections and could reach the server the
# other way round (about one suite run in five on 2 busy vCPUs): the older one then ran last
# and hid the notice. The server now starts them in the order the page sent them, and skips a
# commit sent before one that already ran (ui.session_order, tests/ui/test_session_order.py).
def test_a_refused_slider_value_is_refused_even_while_another_commit_runs(desk):
    page = desk.page
    load_page(desk, charts=False)
    lr = page.locator("#lr input")
    lr.fill("0.3")  # focused, uncommitted: leaving it commits it
    n = page.locator("#n input[type=number]")
    n.fill("1e40")  # lr's commit starts here ...
    n.press("Tab")  # ... and N's follows while it runs
    largest = expected_headline(lr=0.3, n=int(settings()["n"].high))
    wait_for_notice_or_headline(page, "n", largest)
    assert field_message(page, "n").is_visible(), (
        f"N = 1e40 ran as N = {n.input_value()} (headline {headline(page)}) with no message"
    )
    # Each commit's box carried the page's number, in the order the page sent them: the
    # server's order (ui.session_order) reads it there.
    numbers = desk.numbers
    assert len(numbers) >= 2 and all(type(number) is int for number in numbers), numbers
    assert numbers == sorted(set(numbers)), numbers


def test_a_refused_slider_value_stays_what_its_notice_names(desk):
    page = desk.page
    load_page(desk, charts=False)
    n = page.locator("#n input[type=number]")
    n.fill("1e40")
    n.press("Tab")
    largest = expected_headline(n=int(settings()["n"].high))
    # Either the notice names the refused value, or the clamped value is run.
    wait_for_notice_or_headline(page, "n", largest)
    assert field_message(page, "n").is_visible(), "N = 1e40 ran without a message"
    # The slider clamps the box after sending 1e40; the page puts back the value the results
    # show, and the notice says so.
    shown = str(defaults()["n"])
    page.wait_for_function(
        "n => document.querySelector('#n input[type=number]').value === n", arg=shown
    )
    notice = field_message(page, "n").inner_text()
    assert "got 1e+40" in notice and f"back at {shown}" in notice, notice


# -- examples: one run each, a computed caption, the lesson brought into view ---------------------


def _caption_numbers(lesson_id: str, report) -> list[str]:
    """Numbers each lesson's caption must quote, as read from ``report``."""
    entries = sum(p.size for p in report.params.values())
    if lesson_id == "bfloat16-agrees":
        difference = report.mixed_new_loss - report.float32_new_loss
        return [f"{report.kernel.norm_rel_error:.2e}", f"{difference:.3g}"]
    if lesson_id in ("float16-flush", "float16-scaled"):
        flushed = sum(p.underflow_count for p in report.params.values())
        losses = [f"{report.mixed_new_loss:.4g}", f"{report.float32_new_loss:.4g}"]
        said = (
            f"{flushed:,} of {entries:,}"
            if lesson_id == "float16-flush"
            else f"{flushed:,} entries"
        )
        return [*losses, said]
    nonfinite = sum(p.nonfinite_scaled_count for p in report.params.values())
    assert nonfinite > 0 and not math.isfinite(report.mixed_new_loss)
    return [f"{nonfinite:,} of {entries:,}", f"new loss is {report.mixed_new_loss}"]


def test_each_example_applies_its_inputs_together_runs_once_and_teaches(desk):
    page = desk.page
    load_page(desk, charts=False)
    step_events = _step_events(desk.url)
    elem_ids = _elem_ids(desk.url)
    caption = page.locator("#example-caption")
    # From the defaults through every lesson and back to the first (which is the defaults).
    for lesson_id in ("float16-flush", "float16-scaled", "float16-overflow", "bfloat16-agrees"):
        lesson = lesson_by_id(lesson_id)
        values = defaults() | lesson.overrides
        report = run_report(StepConfig(**values))
        expected = f"{report.mixed_new_loss:.7g}"
        seen_before = len(page.evaluate("window.seen"))
        desk.joins.clear()
        desk.senders.clear()
        page.locator(f"#lesson-{lesson_id}").click()

        wait_for_headline(page, expected)
        text = re.sub(r"\s+", " ", caption_text(lesson, report).replace("**", ""))
        page.wait_for_function(
            "text => { const e = document.querySelector('#example-caption');"
            " return e && e.offsetParent !== null"
            " && e.innerText.replace(/\\s+/g, ' ').includes(text); }",
            arg=text,
            timeout=TIMEOUT_MS,
        )
        wait_in_view(page, lesson.target)
        if lesson.tab:
            selected = page.locator("#sections").get_by_role("tab", selected=True)
            expect(selected).to_have_text(lesson.tab, timeout=TIMEOUT_MS)
            # The lesson's tab is drawn for the lesson's run.
            page.wait_for_function(
                f"() => ({DRAWN_TITLES})().some(t => t.startsWith('Mixed vs float32'))",
                timeout=TIMEOUT_MS,
            )
        page.wait_for_timeout(SETTLE_MS)  # let any later event leave the page before counting

        # Every setting arrived together: the headline never showed a half-applied state.
        shown = page.evaluate("window.seen")[seen_before:]
        assert set(shown) <= {f"{expected}|{values['compute_dtype']}"}, (lesson.label, shown)
        # One step run, sent for this lesson's button (one event serves every lesson button:
        # the join names the button clicked).
        sent = zip(desk.joins, desk.senders, strict=True)
        runs = [elem_ids.get(sender) for j, sender in sent if j in step_events]
        assert runs == [f"lesson-{lesson_id}"], (lesson.label, runs)
        assert page.locator("#loss_scale input").input_value() == _fmt(values["loss_scale"])
        assert _checked(page, "compute_dtype") == values["compute_dtype"]
        # The caption's numbers are this run's.
        words = caption.inner_text()
        for number in _caption_numbers(lesson_id, report):
            assert number in words, (lesson.label, number, words)
        if lesson_id == "float16-overflow":
            page.screenshot(path=str(ARTIFACTS / "page_example_overflow.png"))

    # A committed input afterwards hides the caption: it described the example's run.
    lr = page.locator("#lr input")
    lr.fill("0.2")
    lr.press("Enter")
    wait_for_headline(page, expected_headline(lr=0.2))
    expect(caption).to_be_hidden(timeout=TIMEOUT_MS)


# -- the loss scale, its power of two and the presets agree --------------------------------------


def _scale_state(page) -> tuple[str, str, str | None]:
    return (
        page.locator("#loss_scale input").input_value(),
        page.locator("#loss-scale-exponent input[type=number]").input_value(),
        _checked(page, "loss-scale-presets"),
    )


def _expect_scale(page, scale: float, dtype: str) -> None:
    preset = next((label for label, v in LOSS_SCALE_PRESETS.items() if v == scale), None)
    exponent = str(round(math.log2(scale)))
    page.wait_for_function(
        """([scale, exponent, preset]) => {
          const box = document.querySelector('#loss_scale input').value;
          const k = document.querySelector('#loss-scale-exponent input[type=number]').value;
          const p = (document.querySelector('#loss-scale-presets input:checked') || {}).value;
          return box === scale && k === exponent && (p || null) === preset; }""",
        arg=[_fmt(scale), exponent, preset],
        timeout=TIMEOUT_MS,
    )
    wait_for_headline(page, expected_headline(compute_dtype=dtype, loss_scale=scale))


# Leaving the loss-scale box for a preset sends the box's commit and the preset's a moment
# apart, and they could reach the server the other way round (about one suite run in five on
# 2 busy vCPUs): the box's older value then ran last. The server now starts them in the order
# the page sent them, and skips a commit sent before one that already ran (ui.session_order).
def test_the_loss_scale_its_power_of_two_and_the_presets_stay_in_sync(desk):
    page = desk.page
    load_page(desk, charts=False)
    default = defaults()["loss_scale"]
    preset = next((label for label, v in LOSS_SCALE_PRESETS.items() if v == default), None)
    assert _scale_state(page) == (_fmt(default), str(round(math.log2(default))), preset)
    # float16, where the scale changes the result once it overflows.
    page.locator("#compute_dtype").get_by_role("radio", name="float16", exact=True).check()
    _expect_scale(page, default, "float16")

    box = page.locator("#loss_scale input")
    for typed in (4096.0, 1024.0, 1000.0):
        box.fill(_fmt(typed))
        box.press("Enter")
        _expect_scale(page, typed, "float16")

    page.locator("#loss-scale-presets").get_by_text("2^15", exact=True).click()
    _expect_scale(page, LOSS_SCALE_PRESETS["2^15"], "float16")

    exponent = page.locator("#loss-scale-exponent input[type=number]")
    # Typed once the preset's events have settled: one run in five under load, a box typed
    # while the preset's chart events were still pending did not apply on Tab (not yet found why)
    page.wait_for_function(
        "() => !document.querySelector('.pending, .generating')", timeout=TIMEOUT_MS
    )
    exponent.fill("3")
    exponent.press("Tab")  # the slider's box applies when left
    _expect_scale(page, 8.0, "float16")

    # Drag the exponent's handle past float16's range: S = 2^k on release.
    track = page.locator("#loss-scale-exponent input[type=range]")
    track.scroll_into_view_if_needed()
    area = track.bounding_box()
    y = area["y"] + area["height"] / 2
    low, high = float(track.get_attribute("min")), float(track.get_attribute("max"))
    page.mouse.move(area["x"] + area["width"] * (3 - low) / (high - low), y)
    page.mouse.down()
    page.mouse.move(area["x"] + area["width"] * (20 - low) / (high - low), y, steps=4)
    page.mouse.up()
    k = int(track.input_value())
    assert k > 15, k
    _expect_scale(page, 2.0**k, "float16")
    # The drag reached the overflow the slider is there to show.
    assert not math.isfinite(
        run_report(
            StepConfig(**defaults() | {"compute_dtype": "float16", "loss_scale": 2.0**k})
        ).mixed_new_loss
    )


# -- on a phone, and in the dark ----------------------------------------------------------------


def test_every_tab_is_reachable_at_phone_width(browser, app_url):
    session = open_session(browser, app_url, PHONE)
    page = session.page
    try:
        load_page(session)
        tabs = page.locator("#sections [role=tab]")
        assert tabs.all_inner_texts() == SECTION_TABS
        for index in range(tabs.count()):
            tab = tabs.nth(index)
            box = tab.bounding_box()
            assert tab.is_visible() and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"]
        assert not page.get_by_role("button", name="More tabs").is_visible()
        width = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width[0] <= width[1] == PHONE["width"], width
        _axis_title_clears_legend(page)
        page.screenshot(path=str(ARTIFACTS / "page_phone_390x844.png"))
        page.screenshot(path=str(ARTIFACTS / "page_phone_full.png"), full_page=True)
        for name in SECTION_TABS[1:]:
            page.locator("#sections").get_by_role("tab", name=name, exact=True).click()
            selected = page.locator("#sections").get_by_role("tab", selected=True)
            expect(selected).to_have_text(name, timeout=TIMEOUT_MS)
            width = page.evaluate("() => document.documentElement.scrollWidth")
            assert width <= PHONE["width"], (name, width)
    finally:
        page.close()


@pytest.fixture(scope="module")
def dark(browser, app_url):
    session = open_session(browser, app_url, DESKTOP)
    load_page(session, "?__theme=dark")
    yield session
    session.page.close()


def test_the_dark_theme_shows_the_page_dark(dark):
    page = dark.page
    assert page.evaluate("document.body.classList.contains('dark')")  # Gradio's dark class
    dark_rgb = page.evaluate(
        "() => getComputedStyle(document.querySelector('gradio-app')).backgroundColor"
    )
    assert max(int(c) for c in re.findall(r"\d+", dark_rgb)[:3]) < 80, dark_rgb
    page.screenshot(path=str(ARTIFACTS / "page_dark_1400x1000.png"))
    page.screenshot(path=str(ARTIFACTS / "page_dark_full.png"), full_page=True)


def test_dark_theme_chart_text_has_readable_contrast(dark):
    """Titles, tick labels, axis titles and legends against what lies behind them: the chart's
    own paper when it paints one, else the page's background (WCAG AA, 4.5:1)."""
    page = dark.page
    colors = page.evaluate(
        """() => {
        const css = c => { const d = document.createElement('div'); d.style.color = c;
            document.body.appendChild(d); const v = getComputedStyle(d).color; d.remove();
            return v; };
        const clear = c => /rgba\\(.*, 0\\)|transparent/.test(c);
        return Array.from(document.querySelectorAll('.js-plotly-plot'))
          .filter(g => g.offsetParent !== null && g._fullLayout).map(g => {
            let bg = css(g._fullLayout.paper_bgcolor), e = g;
            while (e && clear(bg)) {
              bg = getComputedStyle(e).backgroundColor; e = e.parentElement; }
            const texts = g.querySelectorAll('.gtitle, .xtick text, .ytick text, .g-xtitle text,'
              + ' .g-ytitle text, .legendtext');
            const fills = Array.from(texts).map(t => getComputedStyle(t).fill);
            return {title: String(g.layout.title.text), background: bg,
                    text: Array.from(new Set(fills))};
          }); }"""
    )
    assert colors
    low = []
    for chart in colors:
        background = [float(c) for c in re.findall(r"[\d.]+", chart["background"])[:3]]
        for text in chart["text"]:
            fill = [float(c) for c in re.findall(r"[\d.]+", text)[:3]]
            ratio = contrast(fill, background)
            if ratio < 4.5:
                low.append((chart["title"], text, chart["background"], round(ratio, 2)))
    assert not low, f"chart text below 4.5:1 in the dark theme: {low}"


def test_a_refused_values_message_reads_at_4_5_to_1_and_apart_from_help_in_the_dark_theme(dark):
    """The message in a control's help line is red, not the help's grey (the dark theme's own
    error text colour is near white), at WCAG AA against the control's background."""
    page = dark.page
    load_page(dark, charts=False)
    lr = page.locator("#lr input")
    lr.fill("-1")
    lr.press("Enter")
    expect(field_message(page, "lr")).to_contain_text("got -1", timeout=TIMEOUT_MS)
    colors = page.evaluate(
        """() => ({message: getComputedStyle(document.querySelector('#lr .info-text')).color,
                   help: getComputedStyle(document.querySelector('#loss_scale .info-text')).color,
                   background: getComputedStyle(document.querySelector('#lr')).backgroundColor})"""
    )
    rgb = {
        key: [float(c) for c in re.findall(r"[\d.]+", value)[:3]] for key, value in colors.items()
    }
    assert contrast(rgb["message"], rgb["background"]) >= 4.5, colors
    red, green, blue = rgb["message"]
    assert red > 1.5 * max(green, blue), colors  # red, unlike the help line beside it
    assert rgb["message"] != rgb["help"], colors
    lr.fill(str(defaults()["lr"]))
    lr.press("Enter")
    expect(page.locator(".field-invalid")).to_have_count(0, timeout=TIMEOUT_MS)


# -- the inspector reads typed text ---------------------------------------------------------------


def _inspection(page) -> dict[str, dict[str, str]]:
    """The inspector's table: row label -> {dtype: cell}."""
    rows = page.evaluate(
        """() => Array.from(document.querySelectorAll('#inspection table tr')).map(
            r => Array.from(r.children).map(c => c.innerText.trim()))"""
    )
    header = rows[0][1:]
    return {row[0]: dict(zip(header, row[1:], strict=True)) for row in rows[1:]}


def _inspect(page, text: str) -> None:
    box = page.locator("#inspect-number input, #inspect-number textarea").first
    box.fill(text)
    box.press("Enter")


def test_the_inspector_reads_decimal_hex_and_inf_and_replaces_the_table_on_bad_text(desk):
    page = desk.page
    page.locator("#sections").get_by_role("tab", name=lab_tab.TAB_LABEL, exact=True).click()
    inspection = page.locator("#inspection")
    for text in ("inf", "1e-8", "1e400", "0x1p-24"):  # each shown differs from the last
        value = float.fromhex(text) if text.startswith("0x") else float(text)
        _inspect(page, text)
        typed = text if text == "1e400" else repr(value)  # 1e400 is named as typed (beyond float64)
        expect(inspection).to_contain_text(f"Typed: {typed}", timeout=TIMEOUT_MS)
        table = _inspection(page)
        as_float32 = np.float32(value)  # the inspector stores the typed value as float32 first
        assert table["stored value"]["float32"] == f"{as_float32:.9g}", (text, table)
        assert table["stored value"]["float16"] == f"{np.float16(as_float32):.9g}", (text, table)

    _inspect(page, "xyz")
    expect(inspection).to_contain_text("Invalid number", timeout=TIMEOUT_MS)
    expect(inspection).to_contain_text("xyz", timeout=TIMEOUT_MS)
    assert page.locator("#inspection table").count() == 0  # no old table under the error
    assert page.locator(".toast-body").count() == 0


def test_the_inspector_refuses_text_that_is_no_number(desk):
    page = desk.page
    page.locator("#sections").get_by_role("tab", name=lab_tab.TAB_LABEL, exact=True).click()
    shown = "() => document.querySelector('#inspection')?.innerText || ''"
    _inspect(page, "1")
    page.wait_for_function(f"() => ({shown})().includes('Typed: 1.0')")
    _inspect(page, "abc")
    page.wait_for_function(f"() => !({shown})().includes('Typed: 1.0')")
    text = page.locator("#inspection").inner_text()
    assert "Invalid number" in text and "abc" in text, text
    assert page.locator("#inspection table").count() == 0, text
