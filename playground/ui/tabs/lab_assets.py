"""The precision lab's scripts and styles: the inspector's bit rows and the block list's table.

Rule: each is scoped to its own component (``gr.HTML``'s ``js_on_load`` and ``css_template``).
"""

# The bit rows' script: a press on a bit button asks the server for its flipped pattern, and
# after the rows are drawn again the same bit keeps the keyboard focus.
BITS_JS = """
let pressed = null;
element.addEventListener('click', (event) => {
  const bit = event.target.closest('button[data-bits]');
  if (!bit) return;
  pressed = bit.dataset.key;
  trigger('click', {bits: bit.dataset.bits});
});
// While the box holds a text other than the one inspected, the note says so and the results dim.
const box = () => document.querySelector('#inspect-number input, #inspect-number textarea');
// A table wider than its box scrolls inside it: Tab reaches it, so keys can scroll it too.
// Watched on the whole page: the table is drawn again on every inspection, and first when its
// tab is opened.
new MutationObserver(() => {
  document.querySelectorAll('#inspection table:not([tabindex])').forEach((table) => {
    table.tabIndex = 0;
    table.setAttribute('aria-label', 'the inspected number in each format');
  });
}).observe(document.body, {childList: true, subtree: true});
const mark = () => {
  const note = element.querySelector('.inspect-stale');
  const stale = Boolean(note && box() && box().value.trim() !== note.dataset.typed.trim());
  if (note) note.hidden = !stale;
  const dimmed = [...element.querySelectorAll('.bit-row'), document.getElementById('inspection')];
  dimmed.forEach((part) => { if (part) part.style.opacity = stale ? '0.7' : ''; });
};
document.addEventListener('input', (event) => { if (event.target === box()) mark(); }, true);
watch('value', () => {
  const again = pressed && element.querySelector(`button[data-key="${pressed}"]`);
  if (again) again.focus();
  setTimeout(mark, 50);  // the box's new text (a pressed bit, an example) lands in this update
});
"""
BITS_CSS = """
.bit-row { display: flex; flex-wrap: wrap; align-items: center; gap: 4px; margin: 4px 0; }
.bit-format { min-width: 8.5em; font-family: var(--font-mono); font-size: var(--text-sm); }
.bit-field { display: inline-flex; flex-wrap: wrap; gap: 1px; }
.bit { min-width: 24px; min-height: 28px; margin: 0; padding: 0 2px; border: 1px solid #6b7280;
  border-radius: 3px; font-family: var(--font-mono); font-size: var(--text-md); cursor: pointer; }
.bit:focus-visible { outline: 3px solid #1d4ed8; outline-offset: 1px; }
.sign { background: #fee2e2; color: #7f1d1d; }
.exponent { background: #dbeafe; color: #1e3a8a; }
.mantissa { background: #dcfce7; color: #14532d; }
.bit-legend span { padding: 0 4px; border-radius: 3px; }
.bit-value { font-family: var(--font-mono); font-size: var(--text-sm); }
@media (max-width: 720px) { .bit-format { flex-basis: 100%; } }
"""
BLOCKS_CSS = """
table { display: block; overflow-x: auto; max-width: 100%; }
td, th { white-space: nowrap; padding: 2px 8px; font-family: var(--font-mono); }
"""
