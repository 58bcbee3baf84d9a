"""The route as a learner walks it: each chapter's answer time after Next, fresh and warm.

Usage: ``python bench/bench_route.py [--read 20] [--chapters 18]``

Launches ``python app.py`` (tests/app_server.py) with its start-up warm-up on and an empty
compilation cache of its own (a fresh server: nothing compiled, nothing on disk), and Debian's
Chromium (/usr/bin/chromium) at 1400 x 1000. Then:

  fresh   a learner opens the page the moment it serves and walks the route with the Next
          button, reading each chapter for ``--read`` seconds before the next click (the warm-up
          compiles the route in chapter order meanwhile, ``ui.warm_up.route_requests``);
          target: each chapter answers within 3 s of Next
  warm    once the warm-up has ended, a new visitor walks the whole route without pausing;
          target: each chapter answers within 1 s of Next

Each walk starts once the page has loaded as a visitor sees it (its headline and first charts
drawn). A chapter's answer time runs from the click to the moment its counter, its checked claim
("Checked claim ...") and its picture (a Plotly chart with data, not the one on view before the
click) are all on the page; the time until the chapter's area says what it computes ("computing
...", from the browser itself) is printed too. Prints one line per chapter and the counts within
target, with the machine's load average; it never fails on a time. The server is always stopped.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_browser import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, WARM_UP_DONE  # noqa: E402 (its paths)

from app_server import AppServer  # noqa: E402
from playground.core.lessons.route import ROUTE  # noqa: E402

TARGET_FRESH_S, TARGET_WARM_S = 3.0, 1.0
TIMEOUT_MS = 600_000
WARM_UP_TIMEOUT_S = 1800
# Chapter ``number`` answered: its counter, its checked claim and its picture drawn.
ANSWERED = """([number, total, answer]) => {
  const text = id => (document.getElementById(id)?.innerText || '').replace(/\\s+/g, ' ').trim();
  if (text('route-counter') !== `Chapter ${number} of ${total}`) return false;
  if (!text('route-claim').startsWith('Checked claim')) return false;
  const shown = document.getElementById(answer);
  if (!shown || shown.offsetParent === null) return false;
  // Drawn: a Plotly chart with data, other than the one on view before the click (an empty
  // chart's placeholder, or the previous chapter's picture, is no answer).
  const plot = shown.querySelector('.js-plotly-plot');
  return Boolean(plot && plot.data && plot.data.length && plot.data !== window.__routeWatch.before);
}"""


# Milliseconds, measured in the browser, from Next's click to its busy mark and to the chapter's
# area saying what it computes (null until seen): a click listener and a mutation observer.
WATCH = """() => { const w = window.__routeWatch = {click: null, busy: null, said: null,
    before: document.querySelector('#route-chart .js-plotly-plot')?.data || null};
  document.addEventListener('click', e => { if (e.target.closest('#route-next'))
    w.click = performance.now(); }, {capture: true, once: true});
  const seen = () => { if (w.click === null) return;
    const now = performance.now() - w.click;
    if (w.busy === null && document.querySelector('#route-next.route-busy')) w.busy = now;
    if (w.said === null && (document.getElementById('route-claim')?.innerText || '')
        .includes('computing')) w.said = now;
    if (w.busy !== null && w.said !== null) observer.disconnect(); };
  const observer = new MutationObserver(seen);
  observer.observe(document.getElementById('route'),
    {subtree: true, childList: true, attributes: true, characterData: true}); }"""
SEEN = "() => window.__routeWatch"


def walk(page, chapters: int, read: float) -> tuple[list[float], list[float]]:
    """Click Next ``chapters`` times; each answer's seconds after its click, and the larger of
    the seconds (in the browser) until the button showed its work and the chapter's area said
    what it computes, reading ``read`` seconds between answers."""
    times, working = [], []
    for number in range(1, chapters + 1):
        page.evaluate(WATCH)
        started = time.perf_counter()
        page.locator("#route-next").click()
        page.wait_for_function(
            ANSWERED, arg=[number, len(ROUTE), "route-chart"], timeout=TIMEOUT_MS
        )
        times.append(time.perf_counter() - started)
        seen = page.evaluate(SEEN)
        marks = [seen[key] for key in ("busy", "said")]
        working.append(max(m if m is not None else float("inf") for m in marks) / 1000)
        time.sleep(read)
    return times, working


def opened(browser, url: str):
    page = browser.new_page(viewport=VIEWPORT)
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url)
    page.locator("#route-next").wait_for(state="visible")
    # The page has loaded as a visitor sees it: its own first step answered (the headline's
    # losses) and its first charts drawn (Plotly started); a click sooner would wait behind
    # Plotly's start-up, which bench_browser.py times as the page's first chart.
    page.wait_for_function(
        "() => (document.querySelector('#headline table') || {}).textContent?.length > 0"
        " && Array.from(document.querySelectorAll('.js-plotly-plot'))"
        ".some(g => g.data && g.data.length > 0)"
    )
    return page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--read", type=float, default=20.0, help="seconds a learner reads")
    parser.add_argument("--chapters", type=int, default=len(ROUTE), help="chapters walked")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"cpu_count {os.cpu_count()} | load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PLAYGROUND_WARM_UP"] = "1"
        os.environ["PLAYGROUND_COMPILE_CACHE"] = cache  # nothing compiled on disk: fresh
        server = AppServer(log_name="bench_route.log")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            try:
                server.start()
                fresh, said = walk(opened(browser, server.url), args.chapters, args.read)
                deadline = time.monotonic() + WARM_UP_TIMEOUT_S
                while WARM_UP_DONE not in server.log_text() and time.monotonic() < deadline:
                    time.sleep(2)
                warm, _ = walk(opened(browser, server.url), args.chapters, 0.5)
            finally:
                browser.close()
                server.stop()
    for number, (chapter, first, again) in enumerate(zip(ROUTE, fresh, warm, strict=False), 1):
        print(
            f"{number:2d}. {chapter.title}: fresh {first:.2f} s (target <= {TARGET_FRESH_S:g} s: "
            f"{'PASS' if first <= TARGET_FRESH_S else 'MISS'}), warm {again:.2f} s (target <= "
            f"{TARGET_WARM_S:g} s: {'PASS' if again <= TARGET_WARM_S else 'MISS'})"
        )
    within = sum(t <= TARGET_FRESH_S for t in fresh), sum(t <= TARGET_WARM_S for t in warm)
    print(
        f"within target: fresh {within[0]} of {len(fresh)}, warm {within[1]} of {len(warm)}; "
        f"reading {args.read:g} s a chapter on the fresh walk; load average "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(
        f"Next showed its work and the chapter's area what it computes within "
        f"{max(said) * 1000:.0f} ms of the click (median {sorted(said)[len(said) // 2] * 1000:.0f}"
        " ms, in the browser), on the fresh walk"
    )


if __name__ == "__main__":
    main()
