"""The ``downloads`` input of the heavy endpoints: their files are written only when asked for.

Rule: ``/sweep`` and ``/dynamics`` take ``downloads`` right after the inputs they had when it
was appended (EARLIER: the file and the float8 and pure-run settings), and every input appended
since after it, so a positional call written at any time keeps its meaning. It is JSON's true
or false, nothing else (1, "true" or null are refused, naming it): false (the default) answers
None for the files output and writes nothing to disk; true writes the CSV and the JSON
summary once, into Gradio's cache (``views.file_store``). The page's buttons ask for them: their
``js`` (``ask_js``) sends true for the hidden ``downloads`` checkbox, so the page shows its files.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import gradio as gr

from playground.core.settings.settings import shown
from playground.ui.arguments import Arguments
from playground.views.file_store import DiskFull

NAME = "downloads"
# The inputs the heavy endpoints took when ``downloads`` was appended after them.
EARLIER = ("data", "fp8_scaling", "amax_history", "pure_rounding")


def position(arguments: Arguments) -> int:
    """Where ``downloads`` sits among ``arguments``' inputs: right after the last of EARLIER."""
    return 1 + max(index for index, name in enumerate(arguments.order) if name in EARLIER)


def page_inputs(arguments: Arguments, controls: list[Any], box: gr.Checkbox) -> list[Any]:
    """The page event's inputs: ``controls`` (in ``arguments.order``) with ``box`` in place."""
    at = position(arguments)
    return [*controls[:at], box, *controls[at:]]


def ask_js(arguments: Arguments) -> str:
    """Run in the browser before the page's event is sent: the ``downloads`` input is true."""
    at = position(arguments)
    return f"(...inputs) => inputs.map((value, index) => (index === {at} ? true : value))"


def with_downloads(arguments: Arguments, fn: Callable[[dict[str, Any], bool], Any]) -> Callable:
    """``fn(values, downloads)`` as an endpoint with ``arguments``' inputs and ``downloads``
    (default False) in its place; positional or keyword, omitted trailing inputs at their
    defaults; a ``downloads`` that is no boolean is refused naming it. A full disk
    (``file_store.DiskFull``) becomes gr.Error with its message."""
    asked = inspect.Parameter(NAME, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=False)
    parameters = list(arguments.signature.parameters.values())
    at = position(arguments)
    signature = arguments.signature.replace(parameters=[*parameters[:at], asked, *parameters[at:]])

    def endpoint(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        downloads = values.pop(NAME)
        if not isinstance(downloads, bool):
            raise gr.Error(
                f"{NAME} must be true or false; got {shown(downloads)}",
                title=f"Invalid {NAME}",
                print_exception=False,
            )
        try:
            return fn(dict(zip(arguments.order, values.values(), strict=True)), downloads)
        except DiskFull as error:  # over the disk bound: say so, naming the cap
            raise gr.Error(
                str(error), title="No room for downloads", print_exception=False
            ) from None

    endpoint.__signature__ = signature
    endpoint.__name__, endpoint.__doc__ = fn.__name__, fn.__doc__
    return endpoint


def checkbox() -> gr.Checkbox:
    """The page's ``downloads`` input: hidden, False as the API's default; ASK_JS sets it."""
    return gr.Checkbox(False, label=NAME, visible=False)
