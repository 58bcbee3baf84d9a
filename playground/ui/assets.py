"""The page's own CSS and JS: notices, the stale banner, wide tables, keyboard commits.

Rule: styles key on the elem_ids and classes the layout gives (``#headline``, ``.field-notice``,
``.stale-banner``, ``.commit-slider``); the JS makes the keyboard commit as the pointer does, and
marks the results stale when the page loses its server (``LOST_TEXT``).
"""

from __future__ import annotations

import json


def scroll_js(element_id: str) -> str:
    """JS that scrolls the element with ``element_id`` to the top of the window."""
    return (
        f"() => {{ const e = document.getElementById({element_id!r});"
        " if (e) e.scrollIntoView({behavior: 'smooth', block: 'start'}); }"
    )


CSS = """
#headline table, #inspection table, #magnitudes table { display: block; overflow-x: auto; }
#headline td, #inspection td, #magnitudes td { white-space: nowrap; }
#headline p, #headline ul { margin-top: 4px; margin-bottom: 4px; }
#intro p { margin: 4px 0; }
#intro h1 { margin-bottom: 4px; }
#pytorch-line p { margin: 0; font-size: var(--text-sm); }
#examples button { flex: 1 1 200px; white-space: normal; }
#example-caption { border-left: 4px solid var(--color-accent); padding-left: 10px; }
.field-notice { color: var(--error-text-color); font-size: var(--text-sm); }
.field-notice p { margin: 0; }
.stale-banner { padding: 6px 10px; border-radius: 6px; border: 1px solid var(--error-border-color);
  background: var(--error-background-fill); color: var(--error-text-color); }
/* Results that no longer match the inputs stay readable but visibly dimmed. */
#results:has(.stale-banner) > :not(#status):not(#lost-banner) { opacity: 0.45; }
@media (max-width: 720px) {
  #results { order: -1; }
  #headline th, #headline td, #magnitudes th, #magnitudes td { padding: 4px 6px; }
}
"""


# The banner over the results when the page loses its server (Gradio's error toast says so: a
# restart, say): a setting committed meanwhile never ran, so the box may show a value the results
# were not computed with. They are marked as stale ones are, with this banner and dimmed, until
# the headline changes (a later commit answered).
LOST_ID = "lost-banner"
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
    f"() => {{\n  const lostId = {json.dumps(LOST_ID)}, lostText = {json.dumps(LOST_TEXT)};\n"
    f"  const lostToasts = {json.dumps(LOST_TOASTS)};\n"
    """  const showLost = () => {
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
}"""
)
