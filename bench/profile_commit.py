"""What one committed lr costs the page, counted: events, round trips, bytes, handler time.

Usage: ``PYTHONPATH=. python bench/profile_commit.py [--commits 5]``

Serves bench/profiled_app.py (app.py with each event's handler timed and its answer sized) and
opens the page in headless Chromium. After the first charts it commits ``--commits`` new
learning rates (typed, then Enter) and, for each, waits until the page is quiet (no request
for QUIET_MS), then prints per commit: the HTTP requests the page sent (queue joins and other
POSTs), the bytes it received on the queue's event stream (the SSE messages: their count and
size), the events the server processed with their handler seconds and answer bytes, the calls
of Gradio's front-end functions in COUNTED (V8's precise coverage, which also slows the page:
time it with bench_browser.py), and the time from Enter to the new headline and to the page
being quiet. Counts do not depend on the machine's load; times do.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests"))

from app_server import AppServer  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 1000}
QUIET_MS = 3000
# Gradio's front end (its core and Blocks modules, names as minified in Gradio 6.31's build): the
# functions whose calls a commit costs in the browser. ``Z`` finds a component by id by walking
# the page's layout tree (one call per node visited), for every output set, input read and
# loading status set; ``update_loading_stati_state`` sets the loading status of every component
# any event ever tracked (its progress targets, and its inputs once it completed), on each
# status change of any event.
COUNTED = ("Z", "update_state", "get_state", "update_loading_stati_state")
TIMING_JS = """
window.benchKey = null; window.benchChange = null;
document.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') { window.benchKey = performance.now();
        window.benchKeyWall = performance.timeOrigin + performance.now(); } }, true);
window.benchHeadline = () => (document.querySelector('#headline table') || {}).innerText || '';
let benchLast = null;
new MutationObserver(() => { const t = window.benchHeadline();
    if (t !== benchLast) { benchLast = t; window.benchChange = performance.now(); } })
  .observe(document, {subtree: true, childList: true, characterData: true});
"""


def server_lines(server: AppServer, start: int) -> tuple[list[dict], int]:
    lines = server.log_text().splitlines()
    rows = [json.loads(line[8:]) for line in lines[start:] if line.startswith("PROFILE ")]
    return rows, len(lines)


def js_calls(cdp) -> Counter:
    """Calls of each COUNTED function of Gradio's front end since the last call (taking the
    precise coverage resets its counts)."""
    counts: Counter = Counter()
    for script in cdp.send("Profiler.takePreciseCoverage")["result"]:
        if "/core-" not in script["url"] and "/Blocks-" not in script["url"]:
            continue
        for function in script["functions"]:
            if function["functionName"] in COUNTED:
                counts[function["functionName"]] += function["ranges"][0]["count"]
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--tab", default=None, help="open this tab before the commits")
    parser.add_argument("--verbose", action="store_true", help="print every request and event")
    parser.add_argument(
        "--baseline", action="store_true", help="the bare page (bench/baseline_page.py) instead"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    script = "bench/baseline_page.py" if args.baseline else "bench/profiled_app.py"
    server = AppServer(log_name="profile_commit.log", script=script)
    server.start()
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"]
            )
            page = browser.new_page(viewport=VIEWPORT)
            page.set_default_timeout(120_000)
            page.add_init_script(TIMING_JS)
            cdp = page.context.new_cdp_session(page)
            cdp.send("Network.enable")
            cdp.send("Profiler.enable")
            cdp.send("Profiler.startPreciseCoverage", {"callCount": True, "detailed": False})
            log: list[tuple[str, dict]] = []
            for name in (
                "requestWillBeSent",
                "dataReceived",
                "eventSourceMessageReceived",
                "loadingFinished",
            ):
                cdp.on(f"Network.{name}", lambda event, name=name: log.append((name, event)))
            page.goto(server.url)
            page.locator("#headline #mixed-new-loss").wait_for()
            page.wait_for_timeout(3000)
            if args.tab:
                page.locator("#sections").get_by_role("tab", name=args.tab, exact=True).click()
                page.wait_for_timeout(3000)
            _, mark = server_lines(server, 0)
            urls: dict[str, str] = {}
            totals: list[dict] = []
            for i in range(args.commits):
                log.clear()
                js_calls(cdp)  # resets the counts: the next ones are this commit's
                before = page.evaluate("window.benchHeadline()")
                box = page.locator("#lr input")
                box.fill(str(round(0.1 + 0.007 * (i + 1), 4)))
                t0 = time.monotonic()
                box.press("Enter")
                page.wait_for_function(
                    "b => window.benchKey !== null && window.benchHeadline() !== b", arg=before
                )
                headline_ms = page.evaluate("window.benchChange - window.benchKey")
                key_wall = page.evaluate("window.benchKeyWall") / 1e3
                # Quiet: no new request and no data for QUIET_MS.
                last = len(log)
                quiet_since = time.monotonic()
                while time.monotonic() - quiet_since < QUIET_MS / 1e3:
                    page.wait_for_timeout(100)
                    if len(log) != last:
                        last, quiet_since = len(log), time.monotonic()
                settled_ms = (quiet_since - t0) * 1e3
                rows, mark = server_lines(server, mark)
                calls = js_calls(cdp)
                requests = Counter()
                sse_bytes = sse_chunks = 0
                offset = next(
                    (e["wallTime"] - e["timestamp"] for n, e in log if n == "requestWillBeSent"),
                    0.0,
                )
                timeline = []
                for name, event in log:
                    at = (event.get("timestamp", 0) + offset - key_wall) * 1e3
                    path = urls.get(event.get("requestId"), "")
                    if name == "requestWillBeSent":
                        timeline.append(
                            f"{at:.0f} sent {event['request']['url'].split('/')[-1][:20]}"
                        )
                    elif name == "dataReceived" and path.startswith("queue/data"):
                        timeline.append(f"{at:.0f} sse {event['dataLength']}")
                    elif name == "loadingFinished" and path.startswith("run/predict"):
                        timeline.append(f"{at:.0f} predict done")
                    if name == "requestWillBeSent":
                        request = event["request"]
                        path = request["url"].split("/gradio_api/")[-1].split("?")[0]
                        urls[event["requestId"]] = path
                        requests[f"{request['method']} {path}"] += 1
                        if args.verbose:
                            print("   ", request["method"], path, len(request.get("postData", "")))
                    elif name == "dataReceived" and urls.get(event["requestId"], "").startswith(
                        "queue/data"
                    ):
                        sse_bytes += event["dataLength"]
                        sse_chunks += 1
                    elif name == "eventSourceMessageReceived":
                        sse_bytes += len(event.get("data", ""))
                        sse_chunks += 1
                events = Counter(row["name"] for row in rows)
                handler_s = sum(row["s"] for row in rows)
                answer_bytes = sum(row["bytes"] for row in rows)
                input_bytes = sum(row["input_bytes"] for row in rows)
                totals.append(
                    {
                        "headline_ms": headline_ms,
                        "settled_ms": settled_ms,
                        "requests": sum(requests.values()),
                        "events": len(rows),
                        "answer_bytes": answer_bytes,
                        "input_bytes": input_bytes,
                        "sse_bytes": sse_bytes,
                        "handler_ms": handler_s * 1e3,
                        "tree_visits": calls["Z"],
                        "update_state": calls["update_state"],
                        "status_updates": calls["update_loading_stati_state"],
                    }
                )
                print(
                    f"commit {i + 1}: Enter -> headline {headline_ms:.0f} ms, -> quiet "
                    f"{settled_ms:.0f} ms | requests {dict(requests)} | SSE {sse_chunks} chunks "
                    f"{sse_bytes:,} B | events {dict(events)} handler {handler_s * 1e3:.0f} ms, "
                    f"answers {answer_bytes:,} B, inputs {input_bytes:,} B | browser calls {calls}"
                )
                if args.verbose:
                    print("    timeline (ms after Enter):", "; ".join(timeline))
                    for row in rows:
                        print("    ", row)
            median = {key: statistics.median(t[key] for t in totals) for key in totals[0]}
            print(
                f"{'bare page' if args.baseline else 'ours'}, median per commit: "
                + ", ".join(f"{key} {value:,.0f}" for key, value in median.items())
            )
            browser.close()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
