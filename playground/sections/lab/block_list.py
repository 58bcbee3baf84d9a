"""A typed list of numbers as the listed block recipes store it: each block's scale and value.

Rule: the list (numbers separated by commas, each read as the inspector reads one, at most
``block_view.MAX_VALUES``) is one row quantized by each recipe the registry lists
(``Recipe.listed``, read at every call; ``core.recipes.block_view``: blocks of the recipe's 1-D
size, round to nearest, the last block zero-padded). Above the table, per recipe, its formats,
each block's scale (and its power of two when the scale is one) and a two-level recipe's float32
tensor scale; in the table (HTML), per typed value, each recipe's stored value (element x block
scale x tensor scale) and what became of it (kept, flushed to zero, saturated at the element
format's largest).
"""

from __future__ import annotations

import html
from typing import Any

from playground.core.bounds import ConfigError, shown
from playground.core.inspector.typed_number import read_number
from playground.core.recipes.block_view import MAX_VALUES, block_view
from playground.core.recipes.registry import listed_recipes, recipe

DEFAULT_LIST = "0.001, 0.02, 0.3, 1, 5, 40, 1000"


def help_text() -> str:
    """The list box's help line, naming the recipes it lists."""
    return (
        f"Up to {MAX_VALUES} numbers separated by commas (each as in the box above); Enter to see "
        f"how {' and '.join(listed_recipes())} store them: each block's shared scale and every "
        "value."
    )


def read_list(text: Any) -> list[float]:
    """The typed numbers as float64 (the block recipes quantize float32 tensors); ConfigError
    naming ``numbers`` for an empty list, too many numbers, or one the inspector cannot read."""
    parts = [part for part in str(text if text is not None else "").split(",") if part.strip()]
    if not 1 <= len(parts) <= MAX_VALUES:
        raise ConfigError(
            "numbers", f"numbers must hold 1 to {MAX_VALUES} numbers; got {len(parts)}"
        )
    values = []
    for index, part in enumerate(parts, start=1):
        try:
            values.append(read_number(part).float64)
        except ConfigError:
            raise ConfigError(
                "numbers", f"numbers: item {index} is no number; got {shown(part.strip())}"
            ) from None
    return values


def _scale(scale: float, log2: float, power_of_two: bool) -> str:
    return f"2^{log2:.0f}" if power_of_two else f"{scale:.6g}"


def _recipe_line(view: dict[str, Any]) -> str:
    chosen = recipe(view["recipe"]).block
    scales = ", ".join(
        _scale(b["scale"], b["scale_log2"], chosen.power_of_two_scales) for b in view["blocks"]
    )
    line = (
        f"<strong>{view['recipe']}</strong>: {view['element_format']} values, one "
        f"{view['scale_format']} scale per {view['block']}; block scales {scales}"
    )
    if chosen.two_level:
        line += f"; tensor scale {view['tensor_scale']:.6g} (float32)"
    return f"<p>{line}; the last block holds {view['last_block_size']} of {view['block']}.</p>"


def _row(cells: list[str], tag: str = "td") -> str:
    return "<tr>" + "".join(f"<{tag}>{html.escape(cell)}</{tag}>" for cell in cells) + "</tr>"


def block_list_view(text: Any) -> str:
    """The list view (see the rule) as HTML: a line per recipe, then the table (one row per
    typed value); a text it cannot read gets its message instead."""
    try:
        values = read_list(text)
    except ConfigError as error:
        return f"<p><strong>Invalid {error.field}</strong>: {html.escape(str(error))}</p>"
    names = listed_recipes()
    views = [block_view(values, recipe(name).block) for name in names]
    header = ["#", "typed"]
    for name in names:
        header += [f"{name} stored", f"{name} class"]
    rows = []
    for index, value in enumerate(values):
        cells = [str(index + 1), f"{value:.9g}"]
        for view in views:
            entry = view["entries"][index]
            cells += [f"{entry['stored']:.6g}", entry["class"]]
        rows.append(_row(cells))
    # tabindex: a table wider than its box scrolls inside it, and Tab reaches it to scroll.
    table = (
        '<table tabindex="0" aria-label="the list as each recipe stores it">'
        f"<thead>{_row(header, 'th')}</thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return "".join(_recipe_line(view) for view in views) + table
