"""PublicBlocks: the page's rules for every call of an event, before Gradio touches it.

Gradio offers no public hook at these points (checked against Gradio 6.31); the event path's
two overrides that call them are ``ui.gradio_internals.blocks.EventBlocks``'.

Rules:
  arity       omitted trailing inputs take their defaults, as through gradio_client, so an
              older raw HTTP call keeps working after inputs were appended; an input with no
              default that is missing is refused with a message that names it, instead of
              Gradio's, which prints Python objects; more inputs than the event takes are
              refused saying how many it takes (Gradio ignores them).
  files       a file input takes only the client's own upload (``ui.uploads``' admit rule: one
              this client uploaded, read by its first event, then deleted), checked before Gradio
              touches its path; any other input holding a file payload is refused with the
              field's own refusal (a setting's range) before Gradio copies the file into its
              cache (so a raw call can make the server read or delete no other file). Each is
              refused once, as gr.Error naming the field, without a traceback in the log.
  scheduling  each call is processed as ``ui.launch.in_lane`` schedules it: a session's page
              events in the order the page sent them, and large work one request at a time,
              so it never sits in front of small requests.
  skips       an output answered with gr.skip() is sent as such, without touching the session
              (``EventBlocks.postprocess_data``).
"""

from __future__ import annotations

import inspect
from typing import Any

import gradio as gr

from playground.core.settings.settings import ConfigError, check_setting, settings, shown
from playground.ui import gathered_inputs, uploads
from playground.ui.fair_use import request_visitor
from playground.ui.gradio_internals.blocks import EventBlocks, Run
from playground.ui.gradio_internals.events import (
    handler_parameters,
    is_validator,
    validated_event,
)
from playground.ui.launch import in_lane


def _fill_defaults(fn: Any, inputs: list[Any]) -> None:
    """Append the defaults of omitted trailing inputs (in place), as gradio_client does, so an
    older raw HTTP call that predates the later inputs keeps working; an omitted input without
    a default is left missing (and refused by ``_check_count``)."""
    omitted = handler_parameters(fn)[len(inputs) : len(fn.inputs)]
    if all(parameter.default is not inspect.Parameter.empty for parameter in omitted):
        inputs.extend(parameter.default for parameter in omitted)


class Refusal(gr.Error):
    """gr.Error whose text is its message alone: Gradio answers a refusal raised while a run
    joins the queue (its validator) with ``str(error)``, which is gr.Error's quoted repr."""

    def __str__(self) -> str:
        return self.message


def _input_names(fn: Any) -> list[str]:
    """The event's inputs by their API names (the handler's parameters), in order."""
    names = [parameter.name for parameter in handler_parameters(fn)][: len(fn.inputs)]
    return names + [f"input {index + 1}" for index in range(len(names), len(fn.inputs))]


def _check_count(blocks: gr.Blocks, fn: Any, inputs: list[Any]) -> None:
    """Name the missing inputs, or say how many the event takes when it got more."""
    needed = len(fn.inputs)
    if len(inputs) == needed:
        return
    names = _input_names(fn)
    event = validated_event(blocks, fn).api_name or "this event"
    if len(inputs) > needed:
        raise Refusal(
            f"{event} takes {needed} inputs ({', '.join(names)}); got {len(inputs)}, "
            f"{len(inputs) - needed} more than it takes.",
            title="Too many inputs",
            print_exception=False,
        )
    missing = ", ".join(names[len(inputs) :])
    raise Refusal(
        f"{event} takes {needed} inputs "
        f"({', '.join(names)}); got {len(inputs)}, missing {missing}. gradio_client fills "
        "omitted trailing inputs with their defaults; a raw HTTP call must send them all.",
        title="Missing inputs",
        print_exception=False,
    )


def _is_file_payload(item: Any) -> bool:
    """Whether ``item`` is a file payload: a FileData dict with a path and Gradio's meta mark
    (``{"meta": {"_type": "gradio.FileData"}}``, what gradio_client's ``handle_file`` sends)."""
    if not isinstance(item, dict) or not isinstance(item.get("path"), str):
        return False
    meta = item.get("meta")
    return isinstance(meta, dict) and meta.get("_type") == "gradio.FileData"


def _holds_file(value: Any) -> bool:
    """Whether ``value`` holds a file payload anywhere (what Gradio would move into its
    cache); walked without recursion, so no nesting depth can overflow the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if _is_file_payload(item):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _refuse_file(field: str | None, name: str, value: Any) -> None:
    """Raise the refusal of a file payload in an input that takes none: a setting's own
    (its range), else one naming the input."""
    if field in settings():
        check_setting(field, value)  # a file payload is never a valid setting: this raises
    raise ConfigError(name, f"{name} takes no file; got {shown(value)}")


class PublicBlocks(EventBlocks):
    """gr.Blocks whose calls fill omitted inputs, refuse extra ones and any file that is not
    the client's own upload, run as ``ui.launch.in_lane`` schedules them, and send skipped
    outputs without rebuilding
    them (see the module rule)."""

    def admit(self, fn: Any, inputs: list[Any], request: gr.Request | None) -> None:
        """The arity rule, then the files rule, before Gradio's preprocessing touches any path.

        A validator (a run joining the queue) checks the upload and leaves it for the event
        to read."""
        _fill_defaults(fn, inputs)
        _check_count(self, fn, inputs)
        who = request_visitor(request) if request is not None else "unknown"
        read = not is_validator(fn)
        try:
            components, values = gathered_inputs.expanded(fn, inputs)
        except ConfigError as error:
            raise Refusal(str(error), title="Invalid inputs", print_exception=False) from None
        names = (
            [
                getattr(component, "elem_id", None) or f"input {index + 1}"
                for index, component in enumerate(components)
            ]
            if gathered_inputs.is_gathered(fn)
            else _input_names(fn)
        )
        for component, value, name in zip(components, values, names, strict=False):
            try:
                if isinstance(component, gr.File):
                    # The page's own events take *args: the CSV input is known by its elem_id.
                    field = component.elem_id if component.elem_id in uploads.READ_HERE else name
                    uploads.admit(who, value, read=read, field=field)
                elif _holds_file(value):
                    _refuse_file(getattr(component, "elem_id", None), name, value)
            except ConfigError as error:
                raise Refusal(
                    str(error), title=f"Invalid {error.field}", print_exception=False
                ) from None

    async def lane(
        self, fn: Any, inputs: list[Any], session: str | None, run: Run, skip: Run
    ) -> Any:
        """The call, scheduled by ``ui.launch.in_lane`` (see the module rule)."""
        return await in_lane(fn, inputs, run, session, skip)
