"""The page's own CSS and JS: notices, the stale banner, wide tables, keyboard commits, the key
controls on a phone, readable contrast, charts in the dark theme and their text alternatives.

Rule: styles key on the elem_ids and classes the layout gives (``#headline``, ``.field-invalid``,
``.stale-banner``, ``.commit-slider``, ``#key-controls``); the JS makes the keyboard commit as the
pointer does, marks the results stale when the page loses its server (``LOST_TEXT``), dims each
results column while it holds its stale banner (``STALE_BANNERS``: a class the JS sets, not a
``:has()`` rule, which made the browser restyle the whole column at every commit), makes each
radio group one Tab stop whose arrow keys move the choice (and the lesson buttons one toolbar
stop whose arrow keys move between them), names the upload button by its visible
text, and dresses every chart: its text alternative (the figure's ``layout.meta.description``,
computed from its data by ``views.chart_text``) as the chart's accessible name, and
in the dark theme (Gradio's ``body.dark``, from ``?__theme=dark`` or the system's preference) the
light palette swapped for ``views.plotly.DARK_PALETTE``.
"""

from __future__ import annotations

import json

from playground.views.plotly import DARK_PALETTE

# JS that scrolls the element its one input names (``{"elem_id": ...}``, a JSON box's value) to
# the top of the window; nothing when it names none: one listener for elements a server event
# names.
SCROLL_TO_NAMED_JS = (
    "(named) => { const e = named && named.elem_id && document.getElementById(named.elem_id);"
    " if (e) e.scrollIntoView({behavior: 'smooth', block: 'start'}); }"
)


# The banner over the results when the page loses its server (Gradio's error toast says so: a
# restart, say): a setting committed meanwhile never ran, so the box may show a value the results
# were not computed with. They are marked as stale ones are, with this banner and dimmed, until
# the headline changes (a later commit answered).
LOST_ID = "lost-banner"

# A results column is dimmed (CSS's ``.results-stale``) while it holds the banner its selector
# finds: the step's under its status, or the lost connection's; each other column's, anywhere in it.
STALE_CLASS = "results-stale"
STALE_BANNERS = {
    "results": f":scope > #status .stale-banner, :scope > #{LOST_ID}",
    "dynamics-results": ".stale-banner",
    "sweep-results": ".stale-banner",
    "export-results": ".stale-banner",
}

# The class the page's body wears once a route chapter has been opened (``ui.route.opening_js``):
# until then the route's chapter area (``#route-view``), mounted with the page, is out of sight.
ROUTE_OPENED = "route-opened"

CSS = """
#headline table, #inspection table, #magnitudes table, #operations-table table,
#note-block-scaling table { display: block; overflow-x: auto; }
#headline td, #inspection td, #magnitudes td, #operations-table :is(td, th),
#note-block-scaling td { white-space: nowrap; }
#note-block-scaling th { overflow-wrap: normal; word-break: normal; }
/* The comparison's tables: a recipe's name and every number on one line, scrolling sideways
   in their own box when the column is narrower than they are. */
#compare-table table, #compare-memory table,
#architecture-memory table { display: block; overflow-x: auto; }
#compare-table td, #compare-memory td, #architecture-memory td { white-space: nowrap; }
#compare-table th, #compare-memory th,
#architecture-memory th { overflow-wrap: normal; word-break: normal; }
/* The tensors table: a column a recipe, fitting the results column at 1400 px: snug cells, and
   a heading breaks between words, never inside a recipe's name. */
#tensors-table :is(th, td) { padding: 4px 6px; font-size: 13px; }
#tensors-table th { overflow-wrap: normal; word-break: normal; }
#headline p, #headline ul { margin-top: 4px; margin-bottom: 4px; }
/* The losses table fits its column at 1400 px and on a phone, 4.954636e-07 whole: snug cells,
   and the row names (mixed - float32) wrap rather than the numbers. */
#headline th, #headline td { padding: 4px 6px; }
#headline td:first-child { white-space: normal; }
#intro p { margin: 4px 0; }
#intro h1 { margin-bottom: 4px; }
#pytorch-line p { margin: 0; font-size: var(--text-sm); }
/* Every lesson in one row on a desktop (eight of them), two a row on a phone. */
#examples button { flex: 1 1 130px; min-width: 0; white-space: normal; }
/* Every section's tab in one row at 1400 px (eight labels in the results column's 900 px). */
#sections [role=tab] { padding-left: 8px; padding-right: 8px; font-size: 13px; }
#example-caption { border-left: 4px solid var(--color-accent); padding-left: 10px; }
/* The route: one card at the top, its primary button the page's first action; the chapter's
   text beside its chart (under it on a phone), the claim marked like a lesson's caption. */
#route { border: 2px solid var(--color-accent); border-radius: 10px; padding: 12px 16px;
  background: var(--background-fill-secondary); }
#route-intro h2 { margin: 0 0 4px 0; }
body:not(.ROUTE_OPENED) #route-view { display: none !important; }
#route-intro p, #route-counter p { margin: 0; }
/* The route's buttons stay at the top of the window while a chapter is read (Previous and Next
   within reach, on a phone too); a chapter opens with its place right under them. Gradio's
   container hides its overflow, which would make it the sticky row's scroll box (one that never
   scrolls): it clips instead, the same to the eye, and the row sticks to the window. */
.gradio-container { overflow: clip !important; }
#route-nav { align-items: end; position: sticky; top: 0; z-index: 20; padding: 10px 0 6px 0;
  background: var(--background-fill-secondary); }
#route-chapter { scroll-margin-top: 150px; }
/* A route button at work: a spinner and "Opening ..." from the click until the chapter opens. */
.route-busy { position: relative; color: transparent !important; cursor: progress; }
.route-busy::after { position: absolute; inset: 0; display: flex; align-items: center;
  justify-content: center; content: "Opening the chapter ...";
  color: var(--button-primary-text-color, #fff); }
#route-prev.route-busy::after { content: "Opening ..."; color: var(--body-text-color); }
.route-busy::before { content: ""; position: absolute; left: 14px; top: calc(50% - 8px);
  width: 12px; height: 12px; border: 2px solid rgba(255, 255, 255, 0.9);
  border-top-color: transparent; border-radius: 50%; animation: route-spin 0.8s linear infinite; }
#route-prev.route-busy::before { border-color: var(--body-text-color);
  border-top-color: transparent; }
@keyframes route-spin { to { transform: rotate(360deg); } }
#route-nav button { white-space: normal; }
#route-next { font-size: var(--text-lg); min-height: 52px; }
#route-counter { font-size: var(--text-sm); color: var(--body-text-color-subdued); }
#route-chapter h3 { margin: 4px 0; }
#route-claim { border-left: 4px solid var(--color-accent); padding-left: 10px; }
#route-payoff { border-left: 4px solid var(--color-accent-soft, #a5b4fc); padding-left: 10px; }
#explore p { margin: 8px 0 0 0; }
/* The glossary's links at 4.5:1 on the dark theme's background (Gradio's indigo 500: 4.4:1). */
.dark :is(#intro, #route, #glossary) a { color: var(--primary-400, #818cf8); }
.field-notice { color: var(--error-text-color); font-size: var(--text-sm); }
/* A refused value's message is the control's help line (widgets.field_message). */
.field-invalid .info-text { color: var(--error-text-color); }
/* The dark theme's error text colour is near white (made for its error fill): red, at 4.5:1. */
.dark .field-invalid .info-text { color: var(--color-red-400, #f87171); }
.field-notice p { margin: 0; }
.stale-banner { padding: 6px 10px; border-radius: 6px; border: 1px solid var(--error-border-color);
  background: var(--error-background-fill); color: var(--error-text-color); }
/* Results that no longer match the inputs stay readable but visibly dimmed: the page's JS marks
   a column STALE_CLASS while it holds its banner (STALE_BANNERS). A :has() rule said the same,
   but the browser then restyled the whole results column (1,261 elements) at every commit. */
#results.STALE_CLASS > :not(#status):not(#LOST_ID) { opacity: 0.45; }
#dynamics-results.STALE_CLASS > :not(#dynamics-status) { opacity: 0.45; }
/* The sweep's text stays at 4.5:1 contrast when dimmed (0.45 would leave it at 2.6:1). */
#sweep-results.STALE_CLASS > :not(#sweep-status):not(#sweep-rerun) { opacity: 0.7; }
#export-results.STALE_CLASS > :not(#export-status) { opacity: 0.7; }
/* Light theme: Gradio's label chips (indigo 500 on indigo 100, 3.6:1) and help text (grey 400
   on white, 2.5:1) darkened past WCAG AA's 4.5:1; the dark theme's already pass. */
body:not(.dark) [data-testid="block-info"], body:not(.dark) [data-testid="block-label"] {
  color: var(--primary-700, #4338ca); }
body:not(.dark) { --body-text-color-subdued: var(--neutral-600, #4b5563); }
body:not(.dark) .info-text, body:not(.dark) .min_value, body:not(.dark) .max_value {
  color: var(--neutral-600, #4b5563); }
/* A picked choice and a primary button (in either theme, written so as to outrank Gradio's own
   rules): white on indigo 600 (6.3:1) or 700 when hovered, rather than on indigo 500 (4.46:1)
   and 400; the upload's words in indigo 700. */
body:not(.dark) fieldset label.selected, body:is(.dark, :not(.dark)) button.primary {
  background: var(--primary-600, #4f46e5); }
body:is(.dark, :not(.dark)) button.primary:hover { background: var(--primary-700, #4338ca); }
body:not(.dark) [data-testid="upload-text"] { color: var(--primary-700, #4338ca); }
#key-controls { gap: 8px; }
/* A phone stacks the key controls right above the results they change, then the other
   settings: the controls column gives its two parts to the row, which orders them. */
@media (max-width: 720px) {
  #controls { display: contents; }
  #key-controls, #more-controls { flex: 1 1 100%; min-width: 100%; }
  #key-controls { order: -2; }
  #results { order: -1; }
  #headline th, #headline td, #magnitudes th, #magnitudes td { padding: 4px 6px; }
  #operations-table :is(th, td) { padding: 4px 6px; }
  /* Previous and Next on one line, the chapter picker under them, without its label. */
  #route-nav { flex-wrap: wrap; gap: 6px; padding-top: 4px; }
  #route-prev { flex: 0 0 96px !important; min-width: 96px !important; }
  #route-next { flex: 1 1 180px !important; min-width: 180px !important; font-size: var(--text-md);
    min-height: 44px; white-space: nowrap !important; overflow: hidden;
    text-overflow: ellipsis; display: block; }
  #route-select { flex: 1 1 100% !important; min-width: 100% !important; }
  #route-select [data-testid="block-info"] { display: none; }
  /* The route's charts as wide as the phone allows (its box's padding halved). */
  #route { padding: 8px 6px; }
  :is(#route-chart, #route-payoff-chart) { padding: 4px; }
  /* The chapter's heading right under the buttons (its counter scrolled under them). */
  #route-chapter { scroll-margin-top: 124px; }
}
"""
CSS = (
    CSS.replace("STALE_CLASS", STALE_CLASS)
    .replace("LOST_ID", LOST_ID)
    .replace("ROUTE_OPENED", ROUTE_OPENED)
)


LOST_TEXT = (
    "<strong>Not updated</strong>: the connection to the server was lost (it may have "
    "restarted), so a change made meanwhile did not run. Below, the results from before it: "
    "commit the setting again, or reload the page."
)
LOST_TOASTS = ("Connection to the server was lost", "Connection errored out")

# Gradio's slider commits its number box on leaving it (the "release" event) but not on Enter,
# and its track on pointer-up only: Enter leaves the box, and releasing an arrow (Home, End, ...)
# key on the track counts as a pointer-up, so every control commits from the keyboard too.

JS = (
    "() => {\n"
    f"  const lostId = {json.dumps(LOST_ID)}, lostText = {json.dumps(LOST_TEXT)};\n"
    f"  const lostToasts = {json.dumps(LOST_TOASTS)};\n"
    f"  const darkPalette = {json.dumps({k.lower(): v for k, v in DARK_PALETTE.items()})};\n"
    f"  const staleClass = {json.dumps(STALE_CLASS)};\n"
    f"  const staleBanners = {json.dumps(STALE_BANNERS)};\n"
    """  // At the mutations' own moment (not the next frame), so a banner and its dimming show
  // together: one lookup per results column, and a class set only when it changes.
  const markStale = () => {
    for (const [id, banner] of Object.entries(staleBanners)) {
      const column = document.getElementById(id);
      const stale = Boolean(column && column.querySelector(banner));
      if (column && column.classList.contains(staleClass) !== stale) {
        column.classList.toggle(staleClass, stale);
      }
    }
  };
  markStale();
  const showLost = () => {
    const results = document.getElementById("results");
    if (!results || document.getElementById(lostId)) return;
    const banner = document.createElement("div");
    banner.id = lostId;
    banner.className = "stale-banner";
    banner.innerHTML = lostText;
    results.prepend(banner);
    const loss = () => document.querySelector("#headline #mixed-new-loss")?.textContent;
    const shown = loss();
    const cleared = new MutationObserver(() => {
      if (loss() === shown) return;  // a progress mark, not new results
      document.getElementById(lostId)?.remove();
      cleared.disconnect();
    });
    cleared.observe(document.getElementById("results"), {
      subtree: true, childList: true, characterData: true,
    });
  };
  new MutationObserver(() => {
    markStale();
    const toasts = [...document.querySelectorAll(".toast-body.error")];
    if (toasts.some((toast) => lostToasts.some((text) => toast.textContent.includes(text)))) {
      showLost();
    }
  }).observe(document.body, {subtree: true, childList: true});
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (event.key === "Enter" && box.matches && box.matches(".commit-slider input[type=number]")) {
      box.blur();
    }
  }, true);
  // A slider moved with the keyboard commits when its key is released, as a drag does on
  // pointer-up (Gradio's "release" listens to pointerup only).
  const moves = ["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End", "PageUp",
                 "PageDown"];
  document.addEventListener("keyup", (event) => {
    const track = event.target;
    if (moves.includes(event.key) && track.matches &&
        track.matches(".commit-slider input[type=range]")) {
      track.dispatchEvent(new PointerEvent("pointerup", {bubbles: true}));
    }
  }, true);
  // Gradio names each radio of a group apart, so every choice is a Tab stop of its own and the
  // arrow keys do not move the choice: one name per group makes it one stop, as a radio group is.
  const groupRadios = () => {
    document.querySelectorAll("fieldset[id]").forEach((group) => {
      group.querySelectorAll("input[type=radio]").forEach((radio) => {
        if (radio.name !== group.id) radio.name = group.id;
      });
    });
  };
  // The upload button's accessible name ("Click to upload or drop files") leaves out the words
  // it shows ("Drop File Here - or - Click to Upload"): name it by those, then by its label.
  const nameUploads = () => {
    document.querySelectorAll("button.upload-container[aria-label]").forEach((button) => {
      const shown = (button.innerText || "").replace(/\\s+/g, " ").trim();
      const label = button.closest(".block")?.querySelector("[data-testid=block-label]");
      const name = [shown, label?.innerText.trim()].filter(Boolean).join(": ");
      if (shown && button.getAttribute("aria-label") !== name) {
        button.setAttribute("aria-label", name);
      }
    });
  };
  // Plotly draws a figure with the colours it carries: in the dark theme each light-palette
  // colour is swapped for its dark counterpart (one redraw, after which none is left), and the
  // figure's description becomes the chart's accessible name.
  const recolor = (value) => {
    if (typeof value === "string") return darkPalette[value.toLowerCase()] ?? value;
    if (Array.isArray(value)) return value.map(recolor);
    if (value && typeof value === "object") {
      return Object.fromEntries(Object.entries(value).map(([key, v]) => [key, recolor(v)]));
    }
    return value;
  };
  const dress = (chart) => {
    const description = chart.layout?.meta?.description;
    if (description) {
      chart.setAttribute("role", "figure");
      chart.setAttribute("aria-label", description);
    }
    const paper = String(chart.layout?.paper_bgcolor ?? "").toLowerCase();
    if (document.body.classList.contains("dark") && window.Plotly && paper in darkPalette) {
      window.Plotly.react(chart, recolor(chart.data), recolor(chart.layout));
    }
  };
  const dressCharts = () => {
    document.querySelectorAll(".js-plotly-plot").forEach((chart) => {
      if (!chart.dressed && typeof chart.on === "function") {
        chart.dressed = true;
        chart.on("plotly_afterplot", () => setTimeout(() => dress(chart)));
        dress(chart);
      }
    });
  };
  // Gradio's placeholder of an empty value is a div named "Empty value" with no role, a name
  // no screen reader reads (axe: aria-prohibited-attr): an image of that name.
  const roleEmpties = () => {
    document.querySelectorAll("div.empty[aria-label]:not([role])").forEach((empty) => {
      empty.setAttribute("role", "img");
    });
  };
  // The lesson buttons are one Tab stop, a toolbar whose arrow keys (and Home, End) move
  // between them, as the WAI-ARIA toolbar pattern has it: eight lessons no longer stand
  // between the page's start and its first settings. The last one focused keeps the stop.
  const lessonButtons = () => [...document.querySelectorAll("#examples button")];
  const rove = (current) => lessonButtons().forEach((button) => {
    const stop = button === current ? 0 : -1;
    if (button.tabIndex !== stop) button.tabIndex = stop;
    button.dataset.roving = "1";
  });
  const lessonToolbar = () => {
    const bar = document.getElementById("examples");
    if (!bar) return;
    if (bar.getAttribute("role") !== "toolbar") {
      bar.setAttribute("role", "toolbar");
      bar.setAttribute("aria-label", "lessons");
    }
    const buttons = lessonButtons();
    rove(buttons.find((button) => button.dataset.roving && button.tabIndex === 0) || buttons[0]);
  };
  document.addEventListener("focusin", (event) => {
    const button = event.target.closest && event.target.closest("#examples button");
    if (button) rove(button);
  });
  const steps = {ArrowRight: 1, ArrowDown: 1, ArrowLeft: -1, ArrowUp: -1};
  document.addEventListener("keydown", (event) => {
    const button = event.target.closest && event.target.closest("#examples button");
    if (!button || !(event.key in steps || event.key === "Home" || event.key === "End")) return;
    const buttons = lessonButtons();
    const at = buttons.indexOf(button) + (steps[event.key] || 0) + buttons.length;
    const next = {Home: 0, End: buttons.length - 1}[event.key] ?? at % buttons.length;
    event.preventDefault();
    buttons[next].focus();
  });
  const tidy = () => {
    groupRadios(); nameUploads(); roleEmpties(); dressCharts(); lessonToolbar();
  };
  // Once per frame at most, not at each of the hundreds of mutations a commit makes: reading
  // innerText (nameUploads) lays the page out, which at every mutation delays the new loss.
  let tidyQueued = false;
  const tidySoon = () => {
    if (tidyQueued) return;
    tidyQueued = true;
    requestAnimationFrame(() => { tidyQueued = false; tidy(); });
  };
  tidy();
  new MutationObserver(tidySoon).observe(document.body, {subtree: true, childList: true});
}"""
)
