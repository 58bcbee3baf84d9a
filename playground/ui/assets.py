"""The page's own CSS and JS: notices, the stale banner, wide tables, keyboard commits.

Rule: styles key on the elem_ids and classes the layout gives (``#headline``, ``.field-notice``,
``.stale-banner``, ``.commit-slider``); the JS only makes the keyboard commit as the pointer does.
"""

from __future__ import annotations


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
#results:has(.stale-banner) > :not(#status) { opacity: 0.45; }
@media (max-width: 720px) {
  #results { order: -1; }
  #headline th, #headline td, #magnitudes th, #magnitudes td { padding: 4px 6px; }
}
"""


# Gradio's slider commits its number box on leaving it (the "release" event) but not on Enter,
# and its track on pointer-up only: Enter leaves the box, and releasing an arrow (Home, End, ...)
# key on the track counts as a pointer-up, so every control commits from the keyboard too.
JS = """() => {
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
