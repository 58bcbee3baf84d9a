"""The ``downloads`` input of the heavy endpoints: their files are written only when asked for.

Rule: ``/sweep`` and ``/dynamics`` take every input they took, then ``downloads`` (appended with
a default, as CONTRACTS asks, so older calls keep their meaning): False (the default) answers
None for the files output and writes nothing to disk; True writes the CSV and the JSON summary
once, into Gradio's cache (``views.file_store``). The page's buttons ask for them: their ``js``
sends true for the hidden ``downloads`` checkbox, so the page shows its files as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gradio as gr

from playground.ui.arguments import Arguments
from playground.views.file_store import DiskFull

NAME = "downloads"
# Run in the browser before the page's event is sent: the last input (the checkbox) is true.
ASK_JS = "(...inputs) => [...inputs.slice(0, -1), true]"


def with_downloads(arguments: Arguments, fn: Callable[[dict[str, Any], bool], Any]) -> Callable:
    """``fn(values, downloads)`` as an endpoint with ``arguments``' inputs, then ``downloads``
    (default False); positional or keyword, omitted trailing inputs at their defaults. A full
    disk (``file_store.DiskFull``) becomes gr.Error with its message."""
    asked = inspect.Parameter(NAME, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False)
    signature = arguments.signature.replace(
        parameters=[*arguments.signature.parameters.values(), asked]
    )

    def endpoint(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        *values, downloads = bound.arguments.values()
        try:
            return fn(dict(zip(arguments.order, values, strict=True)), downloads is True)
        except DiskFull as error:  # the files asked for find no room: say so, naming the cap
            raise gr.Error(
                str(error), title="No room for downloads", print_exception=False
            ) from None

    endpoint.__signature__ = signature
    endpoint.__name__, endpoint.__doc__ = fn.__name__, fn.__doc__
    return endpoint


def checkbox() -> gr.Checkbox:
    """The page's ``downloads`` input: hidden, False as the API's default; ASK_JS sets it."""
    return gr.Checkbox(False, label=NAME, visible=False)
