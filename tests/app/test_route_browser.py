"""The route ("Start here") in headless Chromium: the first screen says what to do (at most 150
words of prose at 1400 x 1000, one primary button, compute dtype, learning rate and loss scale
above the fold, the tab labels on one row, a glossary it links to), and the route walks from
there, chapter by chapter, each with its place, its question, its claim (computed here from the
core's run) and its picture on one screen, its settings in the controls and the URL, to the
ending, whose Next starts again; on a phone each chapter's claim and picture share the screen
under Previous and Next. Every chapter's screenshot, at both sizes, goes to tests/artifacts/."""

from __future__ import annotations

import re
import time
from urllib.parse import parse_qs, urlparse

import pytest
from playwright.sync_api import expect
from test_browser import ARTIFACTS, TIMEOUT_MS

from browser_waits import navigate, wait_for_headline
from playground.core.lessons import LESSONS, DynamicsLesson
from playground.core.lessons.route import CHAPTERS, ROUTE
from playground.core.settings.settings import StepConfig
from playground.core.step.report import run_report
from playground.ui.route import CHOICES

DESKTOP = {"width": 1400, "height": 1000}
PHONE = {"width": 390, "height": 844}
RUN_TIMEOUT_MS = 4 * TIMEOUT_MS  # a chapter's training run compiles its program the first time
MAX_FIRST_SCREEN_WORDS = 150
# The words of prose on the screen: the Markdown's paragraphs, list items and headings (each
# once, the innermost; tables of numbers, buttons and the controls' labels are not prose).
PROSE = """() => [...document.querySelectorAll('.prose :is(p, li, h1, h2, h3, h4)')]
    .filter(e => !e.closest('table') && !e.querySelector('p, li') && e.offsetParent !== null)
    .filter(e => { const r = e.getBoundingClientRect();
                   return r.height > 0 && r.bottom > 0 && r.top < window.innerHeight; })
    .map(e => [e.closest('[id]')?.id, e.innerText.split(/\\s+/).filter(Boolean).length])"""
ON_SCREEN_BUTTONS = """() => [...document.querySelectorAll('button')].filter(b => {
    const r = b.getBoundingClientRect();
    return b.offsetParent !== null && r.height > 0 && r.bottom > 0 && r.top < window.innerHeight;
}).map(b => ({id: b.id, primary: b.classList.contains('primary')}))"""
TAB_TOPS = """() => [...document.querySelectorAll('#sections [role=tab]')]
    .map(t => Math.round(t.getBoundingClientRect().top))"""
# How the element ``id`` sits on the screen: its top and bottom, and whether it is drawn.
PLACE = """id => { const e = document.getElementById(id); if (!e || e.offsetParent === null)
    return null; const r = e.getBoundingClientRect();
    const plot = e.querySelector('.js-plotly-plot');
    return {top: r.top, bottom: r.bottom, height: r.height,
            title: plot && plot.layout ? String(plot.layout.title?.text ?? '') : null}; }"""
# The text a chart draws (its notes, legend, title, axis titles) that crosses its own edge,
# where the browser clips it: [chart's id, part, px inside the left edge, px inside the right,
# its text's start], for each of the route's charts on the screen.
CLIPPED = """() => [...document.querySelectorAll('#route-chart, #route-payoff-chart')]
    .filter(e => e.offsetParent !== null && e.querySelector('.main-svg')).flatMap(e => {
    const b = e.querySelector('.main-svg').getBoundingClientRect();
    return [...e.querySelectorAll('.annotation, .legend, .gtitle, .g-xtitle, .g-ytitle')]
        .map(a => [a, a.getBoundingClientRect()]).filter(([a, r]) => r.width > 0
            && (r.left < b.left - 1 || r.right > b.right + 1))
        .map(([a, r]) => [e.id, a.getAttribute('class'), Math.round(r.left - b.left),
                          Math.round(b.right - r.right), a.textContent.slice(0, 40)]); })"""
FLAT = "id => (document.getElementById(id)?.innerText || '').replace(/\\s+/g, ' ').trim()"


def _flat(text: str) -> str:
    return " ".join(text.replace("**", "").split())


def _said(text: str) -> str:
    """The page's text without torch's names the glossary's links set beside ours."""
    return re.sub(r" \(torch: [^)]*\)", "", text)


def _expected_claims() -> dict[str, str]:
    """Each chapter's short claim (the route's form), from its lesson's own run in this process
    (the core's)."""
    sentences = {}
    for chapter in ROUTE:
        lesson = LESSONS[chapter.lesson]
        claim = lesson.claim(lesson.run())
        assert claim.holds and claim.short, (chapter.id, claim.condition)
        sentences[chapter.id] = claim.short
    return sentences


def _open(page, url: str) -> None:
    navigate(page, url)
    wait_for_headline(page, f"{run_report(StepConfig()).mixed_new_loss:.7g}", RUN_TIMEOUT_MS)


def _wait_for_chapter(page, number: int) -> None:
    """Wait until chapter ``number`` is open and its claim shown. Both come after the chapter's
    step: a chapter whose program is not compiled yet (a transformer's, on a loaded machine)
    takes its compile's time first, so both waits are a run's; the seconds are printed."""
    counter = f"Chapter {number} of {len(ROUTE)}"
    started = time.perf_counter()
    try:
        page.wait_for_function(
            f"() => ({FLAT})('route-counter') === {counter!r}", timeout=RUN_TIMEOUT_MS
        )
        page.wait_for_function(
            f"() => ({FLAT})('route-claim').startsWith('Checked claim')", timeout=RUN_TIMEOUT_MS
        )
    finally:
        shown = page.evaluate(f"() => ({FLAT})('route-counter')")
        print(f"chapter {number}: {time.perf_counter() - started:.1f} s (shows {shown!r})")


def test_the_first_screen_says_what_to_do(browser, app_url):
    page = browser.new_page(viewport=DESKTOP)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        _open(page, app_url)
        prose = page.evaluate(PROSE)
        words = sum(count for _, count in prose)
        assert 0 < words <= MAX_FIRST_SCREEN_WORDS, str(prose)
        # One obvious first action: the one primary button on the screen, the route's start.
        primary = [b["id"] for b in page.evaluate(ON_SCREEN_BUTTONS) if b["primary"]]
        assert primary == ["route-next"], primary
        # The controls that carry the lessons above the fold.
        for name in ("compute_dtype", "lr", "loss_scale"):
            place = page.evaluate(PLACE, name)
            assert place and place["bottom"] <= DESKTOP["height"], (name, place)
        start = re.compile(rf"Start here: chapter 1 of {len(ROUTE)}")
        expect(page.locator("#route-next")).to_have_text(start)
        expect(page.locator("#route-prev")).to_be_hidden()
        # The tabs' labels on one row at 1400 px.
        tops = page.evaluate(TAB_TOPS)
        assert len(tops) >= 8 and max(tops) - min(tops) <= 2, tops
        # The first words link to the glossary, which explains the page's terms of art.
        expect(page.locator("#intro a[href='#glossary']")).to_have_count(1)
        glossary = page.evaluate(f"() => ({FLAT})('glossary')")
        for term in ("the exercise", "float32 masters", "binade", "flushed", "pure run", "amax"):
            assert f"{term}" in glossary, term
        assert "the reference exercise this playground is built from" in glossary
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "route_first_screen.png"))
    finally:
        page.close()


def test_next_opens_the_first_chapter_with_its_claim_and_chart(browser, app_url):
    """The route's smoke test (the quick tier's; the walk below is the full tier's): Next opens
    chapter 1, whose checked claim is the one its lesson's run in this process makes, with its
    chart drawn."""
    chapter = ROUTE[0]
    lesson = LESSONS[chapter.lesson]
    claim = lesson.claim(lesson.run())
    page = browser.new_page(viewport=DESKTOP)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        _open(page, app_url)
        page.locator("#route-next").click()
        _wait_for_chapter(page, 1)
        shown = _said(page.evaluate(f"() => ({FLAT})('route-claim')"))
        assert shown == f"Checked claim ({lesson.label}): {_flat(claim.short)}"
        page.wait_for_function(f"() => ({PLACE})('route-chart')?.height > 50")
    finally:
        page.close()


@pytest.mark.slow
def test_the_route_walks_every_chapter_with_its_claim_beside_its_picture(browser, app_url):
    # The expected claims are computed here first: the app then reads their programs from the
    # run's compilation cache (tests/conftest.py) instead of compiling them at the same time.
    expected = _expected_claims()
    page = browser.new_page(viewport=DESKTOP)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        _open(page, app_url)
        for number, chapter in enumerate(ROUTE, 1):
            page.locator("#route-next").click()
            _wait_for_chapter(page, number)
            lesson = LESSONS[chapter.lesson]
            claim = _said(page.evaluate(f"() => ({FLAT})('route-claim')"))
            assert claim == f"Checked claim ({lesson.label}): {_flat(expected[chapter.id])}"
            question = _said(page.evaluate(f"() => ({FLAT})('route-chapter')"))
            assert question == f"{number}. {chapter.title} {chapter.question}"
            # The claim and the picture that answers it are on the screen together, under the
            # route's buttons.
            page.wait_for_function(
                "() => { const p = (" + PLACE + ")('route-chart');"
                " return p && p.height > 50 && p.title && p.title.length > 0; }"
            )
            said, drawn = page.evaluate(PLACE, "route-claim"), page.evaluate(PLACE, "route-chart")
            buttons = page.evaluate(PLACE, "route-nav")
            assert said["top"] >= buttons["bottom"] - 1, (chapter.id, said, buttons)
            assert drawn["top"] < DESKTOP["height"] - 50, chapter.id
            if chapter.payoff:
                payoff = _flat(LESSONS[chapter.payoff].label)
                text = page.evaluate(f"() => ({FLAT})('route-payoff')")
                assert f"What it does to the training ({payoff}):" in text
                page.wait_for_function(f"() => ({PLACE})('route-payoff-chart')?.height > 50")
            else:
                expect(page.locator("#route-payoff-chart")).to_be_hidden()
            # The chapter's settings are the controls' and the URL's (the URL is written once
            # the chapter's step has answered, which may come after its picture).
            training = isinstance(lesson, DynamicsLesson)
            overrides = lesson.step_overrides if training else lesson.overrides
            changed = [[k, v] for k, v in overrides.items() if v != StepConfig().to_dict()[k]]
            page.wait_for_function(
                """pairs => { const q = new URLSearchParams(location.search);
                    return pairs.every(([n, v]) => q.has(n)
                        && (q.get(n) === String(v) || parseFloat(q.get(n)) === v)); }""",
                arg=changed,
            )
            query = parse_qs(urlparse(page.url).query)
            for name, value in overrides.items():
                if name in query:  # a value at its default is left out of the link
                    shown = query[name][0]
                    assert shown == str(value) or float(shown) == value, (name, shown)
                else:
                    assert value == StepConfig().to_dict()[name], (chapter.id, name)
            dtype = lesson.config().compute_dtype
            expect(
                page.locator("#compute_dtype").get_by_role("radio", name=dtype, exact=True)
            ).to_be_checked()
            page.screenshot(path=str(ARTIFACTS / f"route_1400x1000_{number:02d}.png"))
            assert page.evaluate(CLIPPED) == [], chapter.id
        # The ending sums the route up; its Next starts again, its Previous goes back.
        assert "What the route showed" in page.evaluate(f"() => ({FLAT})('route-payoff')")
        expect(page.locator("#route-next")).to_have_text(f"Start again: 1. {ROUTE[0].title}")
        page.locator("#route-prev").click()
        _wait_for_chapter(page, len(ROUTE) - 1)
    finally:
        page.close()


@pytest.mark.slow
def test_on_a_phone_each_chapter_shares_one_screen_with_its_picture_in_the_dark(browser, app_url):
    """One walk on a phone in the dark theme (the desktop's light walk is the test above): after
    each Next, Previous and Next are on the screen, and the chapter's claim and its picture
    share the screen under them; the loss-scaling payoff is three clicks away."""
    page = browser.new_page(viewport=PHONE)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        _open(page, app_url + "?__theme=dark")
        # The first action is a button a thumb finds: the start takes its own line.
        start = page.evaluate(PLACE, "route-next")
        assert start["bottom"] - start["top"] >= 40, start
        assert (
            page.evaluate(
                "() => document.getElementById('route-next').getBoundingClientRect().width"
            )
            >= PHONE["width"] / 2
        )
        clipped = []  # every chapter's, so one run names them all
        for number, chapter in enumerate(ROUTE, 1):
            page.locator("#route-next").click()
            _wait_for_chapter(page, number)
            page.wait_for_function(f"() => ({PLACE})('route-chart')?.height > 50")
            page.wait_for_timeout(800)  # the smooth scroll to the chapter
            buttons = [page.evaluate(PLACE, name) for name in ("route-next", "route-prev")]
            for place in buttons[: 1 if number == 1 else 2]:
                assert place and place["top"] >= 0 and place["bottom"] <= PHONE["height"], place
            nav = page.evaluate(PLACE, "route-nav")
            said, drawn = page.evaluate(PLACE, "route-claim"), page.evaluate(PLACE, "route-chart")
            assert said["top"] >= nav["bottom"] - 1, (chapter.id, said, nav)
            assert drawn["bottom"] <= PHONE["height"], (chapter.id, drawn)
            page.screenshot(path=str(ARTIFACTS / f"route_390x844_{number:02d}.png"))
            clipped += [[chapter.id, *part] for part in page.evaluate(CLIPPED)]
            if chapter.id == "float16-loss-scale":
                assert number == 3
                text = page.evaluate(f"() => ({FLAT})('route-payoff')")
                assert "What changed in this one step" in text and "trains like float32" in text
        assert clipped == []
        assert page.evaluate("() => document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        page.close()


# Every table under the route and in the losses table beside it whose right edge is cut: past
# the screen, or past an ancestor that hides its overflow, or wider than its own box without
# scrolling in it. Each as [id of its nearest named ancestor, what cuts it].
CUT_TABLES = """() => [...document.querySelectorAll('#route table, #headline table')]
    .filter(t => t.offsetParent !== null).flatMap(t => {
    const r = t.getBoundingClientRect(), id = t.closest('[id]')?.id, cut = [];
    if (r.right > window.innerWidth + 1) cut.push(`past the screen (${r.right})`);
    for (let a = t.parentElement; a && a !== document.body; a = a.parentElement) {
        const s = getComputedStyle(a), q = a.getBoundingClientRect();
        if (s.overflowX !== 'visible' && q.right + 1 < r.right)
            cut.push(`${a.id || a.className} hides ${r.right - q.right}px`);
    }
    const scrolls = ['auto', 'scroll'].includes(getComputedStyle(t).overflowX);
    if (t.scrollWidth > t.clientWidth + 1 && !scrolls) cut.push('wider than its box');
    return cut.map(c => [id, c]); })"""


def test_no_table_is_cut_at_1400_px_when_a_step_diverges(browser, app_url):
    # The losses table of a diverging step's large numbers (chapter 11, block scaling).
    page = browser.new_page(viewport=DESKTOP)
    page.set_default_timeout(TIMEOUT_MS)
    try:
        _open(page, app_url)
        number = ROUTE.index(CHAPTERS["block-scaling"]) + 1
        page.locator("#route-select input").click()
        page.get_by_role("option", name=CHOICES[number - 1], exact=True).click()
        _wait_for_chapter(page, number)
        assert page.evaluate(CUT_TABLES) == []
    finally:
        page.close()
