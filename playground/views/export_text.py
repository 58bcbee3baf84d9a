"""Writing values into an exported script: literals, the template's places, embedded arrays.

Rule: a template (a runnable module of ``playground.core``, read as text, never imported) has
places that rendering rewrites, each of which must occur exactly once (a RuntimeError names the
one that does not). A value becomes Python source that evaluates to exactly it (``literal``).
An array becomes base64 text of its float32 little-endian bytes, split into lines of
``BASE64_LINE`` characters inside parentheses (``embedded``): exact, and about 1.4 times smaller
than decimal text. A script embeds at most ``MAX_EMBEDDED_VALUES`` float32 values, which keeps
it under ``MAX_SCRIPT_BYTES``; above that the export is refused naming the field that grew it
(``check_embedded``), before anything is computed.
"""

from __future__ import annotations

import base64
import functools
import importlib.resources
import json
import math
import re
from collections.abc import Callable

import numpy as np

from playground.core.data.synthetic import NOISE_STD
from playground.core.settings.settings import ConfigError, settings

MAX_SCRIPT_BYTES = 2_000_000
BASE64_LINE = 76  # characters of base64 per line: 8 of indent and 2 quotes keep lines <= 88
# base64 takes 16/3 characters per float32 value, plus 11 per line of BASE64_LINE of them
# (indent, quotes, newline): 6.1 characters a value. 300,000 values are 1.84 MB, leaving
# space for the script's code.
MAX_EMBEDDED_VALUES = 300_000


@functools.cache
def template(name: str) -> str:
    """A template's text, read as a file of ``playground.core.export`` (never imported)."""
    return importlib.resources.files("playground.core.export").joinpath(name).read_text("utf-8")


def rewrite(
    text: str,
    place: re.Pattern[str],
    what: str,
    replace: Callable[[re.Match[str]], str],
    name: str,
) -> str:
    """``text`` with the one match of ``place`` replaced by ``replace(match)``."""
    new, count = place.subn(replace, text)
    if count != 1:
        raise RuntimeError(f"the export template {name} needs one {what}; it has {count}")
    return new


def literal(value: int | float | str) -> str:
    """``value`` as Python source that evaluates to exactly the same value."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    mantissa, exponent = math.frexp(value)
    if mantissa == 0.5 and abs(exponent - 1) >= 10:  # a far power of two reads better as 2.0**k
        return f"2.0**{exponent - 1}"
    return repr(float(value)).replace("e+", "e")  # 1e+38 -> 1e38, as ruff format writes it


def embedded(array: np.ndarray, indent: int = 8) -> str:
    """Source of a parenthesized string: the base64 of ``array``'s float32 little-endian bytes,
    read back by ``np.frombuffer(base64.b64decode(text), "<f4")``."""
    text = base64.b64encode(np.ascontiguousarray(array, "<f4").tobytes()).decode("ascii")
    if len(text) <= BASE64_LINE:  # one line: no parentheses, as a formatter writes it
        return f'"{text}"'
    pad = " " * indent
    lines = [f'{pad}"{text[i : i + BASE64_LINE]}"' for i in range(0, len(text), BASE64_LINE)]
    return "(\n" + "\n".join(lines) + f"\n{pad[:-4]})"


def settings_lines(values: dict[str, int | float | str], batch) -> list[str]:
    """A script's settings block: each setting with its label, the noise of the synthetic
    targets, and the uploaded batch embedded (``DATA``, None without an upload)."""
    table = settings()
    lines = [
        f"{name.upper()} = {literal(value)}  # {table[name].label}"
        for name, value in values.items()
    ]
    data = "None"
    if batch is not None:
        arrays = ",\n".join(
            f'    "{key}": {embedded(a)}' for key, a in zip("xy", batch, strict=True)
        )
        data = "{\n" + arrays + ",\n}"
    return [
        *lines,
        "",
        f"NOISE_STD = {literal(NOISE_STD)}  # of the noise added to the teacher's targets",
        f"DATA = {data}  # an uploaded batch (float32, little-endian, base64), or None",
    ]


def check_embedded(sizes: dict[str, int], framework: str) -> None:
    """Refuse a script that would embed more than MAX_EMBEDDED_VALUES values.

    ``sizes``: values embedded, by the field that sets their count (``data`` for an upload, the
    one thing either script embeds: both draw their batch and parameters from the seeds); the
    refusal names the largest.
    """
    total = sum(sizes.values())
    if total <= MAX_EMBEDDED_VALUES:
        return
    field = max(sizes, key=sizes.__getitem__)
    label = "your CSV file" if field == "data" else settings()[field].label
    parts = ", ".join(f"{count:,} for {name}" for name, count in sizes.items() if count)
    raise ConfigError(
        field,
        f"{field} ({label}): the {framework} script embeds its data as text and must stay "
        f"under {MAX_SCRIPT_BYTES / 1e6:g} MB, which holds at most {MAX_EMBEDDED_VALUES:,} "
        f"float32 values; this export needs {total:,} ({parts}). A smaller {field} fits.",
    )
