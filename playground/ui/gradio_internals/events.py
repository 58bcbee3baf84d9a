"""The page's events as Gradio registered them: ``BlockFunction`` records.

Gradio (6.31) keeps each event listener's record in ``Blocks.fns`` (index -> BlockFunction) and
documents none of it. The app reads only what the listener was given (``api_name``,
``api_visibility``, ``concurrency_id``, ``inputs``, ``outputs``, ``batch``, ``fn``,
``validator``) plus, here, the record's ``_id`` (its index, the kind of a page event) and
``is_validator_function`` (the record Gradio makes to run a validator when a run joins).
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import gradio as gr


def event_of_join(blocks: gr.Blocks, path: str, payload: dict[str, Any]) -> Any:
    """The event a join names (None if none): ``POST .../call/<api_name>`` by its API name,
    ``POST .../queue/join`` by the body's ``fn_index``."""
    fns = blocks.fns
    if "/call/" in path:
        api_name = path.rstrip("/").rsplit("/call/", 1)[1]
        found = [fn for fn in fns.values() if fn.api_name == api_name]
        return found[0] if found else None
    fn_index = payload.get("fn_index")
    return fns.get(fn_index) if isinstance(fn_index, int) else None


def event_kind(fn: Any) -> int:
    """The event's index among the page's events: the same for every call of it."""
    return fn._id


def is_validator(fn: Any) -> bool:
    """Whether ``fn`` is the record Gradio runs a validator with (no concurrency group, no API
    name)."""
    return getattr(fn, "is_validator_function", False)


def validated_event(blocks: gr.Blocks, fn: Any) -> Any:
    """The event whose validator ``fn`` runs; ``fn`` itself when it is no validator."""
    if not is_validator(fn):
        return fn
    events = [event for event in blocks.fns.values() if event.validator is fn.fn]
    return events[0] if events else fn


def handler_parameters(fn: Any) -> list[inspect.Parameter]:
    """The handler's inputs, in order, without the parameters Gradio fills by their annotation
    (the request, the event's data)."""
    filled = (gr.Request, "gr.Request", gr.EventData, "gr.EventData")
    return [
        parameter
        for parameter in inspect.signature(fn.fn).parameters.values()
        if parameter.annotation not in filled
    ]


def _skip(*_inputs: Any) -> dict[str, Any]:
    return gr.skip()


def answering_skip(fn: Any) -> Any:
    """A copy of the event ``fn`` whose handler answers gr.skip() (changes nothing)."""
    part = copy.copy(fn)
    part.fn = _skip
    return part


def with_outputs(fn: Any, outputs: list[Any]) -> Any:
    """A copy of the event ``fn`` with only ``outputs``."""
    part = copy.copy(fn)
    part.outputs = outputs
    return part
