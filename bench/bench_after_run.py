"""A committed lr before and after a training run is on the page (launched app, headless Chromium).

Usage: ``python bench/bench_after_run.py [--commits 15]``

Serves ``python app.py`` without its warm-up (tests/app_server.py), opens the page in Debian's
Chromium, commits ``--commits`` new learning rates (typed, then Enter; timed as
bench_browser.py times them, inside the page), runs the Training dynamics tab's run at its
defaults, waits for its three charts, and commits as many again. Gradio's front end reads the
data of every component an event ever tracked at each later status change, so what a run's
events track costs every commit after it. Prints the two medians and their ratio measured in
this run; never fails on a time. The server is always stopped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests"))
sys.path.insert(0, str(REPO_ROOT / "bench"))
os.environ["PLAYGROUND_WARM_UP"] = "0"

import bench_browser as B  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from app_server import AppServer  # noqa: E402
from playground.sections.dynamics.stale import TRAIN_WORDS  # noqa: E402

RUN_TRACES_JS = "document.querySelectorAll('#dynamics-results .js-plotly-plot .trace').length"


def _commits(page, count: int, first: int) -> list[float]:
    times = []
    for index in range(count):
        times.append(B._commit(page, "#lr input", f"0.1{first + index}7", "Enter"))
        page.wait_for_timeout(300)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=15, help="lr commits before and after")
    args = parser.parse_args()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=B.CHROMIUM, args=B.CHROMIUM_ARGS)
        server = AppServer(log_name="bench_after_run.log").start()
        try:
            page = browser.new_page(viewport=B.VIEWPORT)
            page.add_init_script(B.TIMING_JS)
            page.set_default_timeout(120_000)
            page.goto(server.url)
            page.locator("#headline #mixed-new-loss").wait_for()
            _commits(page, 3, 100)  # the commit's programs and the page's first draws
            before = _commits(page, args.commits, 200)
            page.get_by_role("tab", name="Training dynamics").click()
            page.get_by_role("button", name=TRAIN_WORDS).click()
            page.wait_for_function(f"() => {RUN_TRACES_JS} >= 3")
            page.wait_for_timeout(1500)
            _commits(page, 3, 300)
            after = _commits(page, args.commits, 400)
            ms = [statistics.median(times) * 1e3 for times in (before, after)]
            print(f"committed lr -> new loss shown, before a training run: median {ms[0]:.0f} ms")
            print(f"committed lr -> new loss shown, after a training run: median {ms[1]:.0f} ms")
            print(f"after / before: {ms[1] / ms[0]:.2f} (the run's charts on the page)")
        finally:
            server.stop()
            browser.close()


if __name__ == "__main__":
    main()
