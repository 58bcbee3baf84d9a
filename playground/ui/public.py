"""PublicBlocks: the few places where the page needs Gradio's event path itself.

Each override exists because Gradio offers no public hook at that point (checked against
Gradio 6.31); tests/app/test_skips.py compares the skips with Gradio's own postprocessing.

Rules:
  arity       omitted trailing inputs take their defaults, as through gradio_client, so an
              older raw HTTP call keeps working after inputs were appended; an input with no
              default that is missing is refused with a message that names it, instead of
              Gradio's, which prints Python objects; more inputs than the event takes are
              refused saying how many it takes (Gradio ignores them).
  files       a file input takes only the visitor's own upload (``ui.uploads``' admit rule: one
              this visitor uploaded, read by its first event, then deleted), checked before Gradio
              touches its path; any other input holding a file payload is refused with the
              field's own refusal (a setting's range) before Gradio copies the file into its
              cache (so a raw call can make the server read or delete no other file). Each is
              refused once, as gr.Error naming the field, without a traceback in the log.
  lanes       each event's handler is called in its lane (``ui.launch.in_lane``): large work
              waits for the one large lane, so it never sits in front of small requests.
  skips       an output answered with gr.skip() (an update naming no property) is sent as
              such without touching the session: Gradio would rebuild that component for the
              session (about 1 ms each), which made an event with many outputs, most of them
              unchanged, spend 60-130 ms here instead of the handler's 3 ms.
"""

from __future__ import annotations

import contextvars
import copy
import inspect
from typing import Any

import gradio as gr
from gradio.blocks import Block, convert_component_dict_to_list
from gradio_client.utils import is_file_obj_with_meta

from playground.core.settings.settings import ConfigError, check_setting, settings, shown
from playground.ui import uploads
from playground.ui.fair_use import request_visitor
from playground.ui.launch import in_lane

# The visitor (``ui.fair_use``'s key) of the event being processed, for the upload rule.
_visitor: contextvars.ContextVar[str] = contextvars.ContextVar("visitor", default="unknown")


def _is_skip(value: Any) -> bool:
    """gr.skip(): an update that names no property (so changes nothing)."""
    return isinstance(value, dict) and value == {"__type__": "update"}


def _parameters(block_fn: Any) -> list[inspect.Parameter]:
    """The handler's inputs, in order, without Gradio's request parameter."""
    return [
        parameter
        for parameter in inspect.signature(block_fn.fn).parameters.values()
        if parameter.annotation not in (gr.Request, "gr.Request")
    ]


def _fill_defaults(block_fn: Any, inputs: list[Any]) -> None:
    """Append the defaults of omitted trailing inputs (in place), as gradio_client does, so an
    older raw HTTP call that predates the later inputs keeps working; an omitted input without
    a default is left missing (and refused by ``validate_inputs``)."""
    omitted = _parameters(block_fn)[len(inputs) : len(block_fn.inputs)]
    if all(parameter.default is not inspect.Parameter.empty for parameter in omitted):
        inputs.extend(parameter.default for parameter in omitted)


class Refusal(gr.Error):
    """gr.Error whose text is its message alone: Gradio answers a refusal raised while a run
    joins the queue (its validator) with ``str(error)``, which is gr.Error's quoted repr."""

    def __str__(self) -> str:
        return self.message


def _input_names(block_fn: Any) -> list[str]:
    """The event's inputs by their API names (the handler's parameters), in order."""
    names = [parameter.name for parameter in _parameters(block_fn)][: len(block_fn.inputs)]
    return names + [f"input {index + 1}" for index in range(len(names), len(block_fn.inputs))]


def _event_name(blocks: gr.Blocks, block_fn: Any) -> str:
    """The event's API name; a validator's is its event's."""
    if getattr(block_fn, "is_validator_function", False):
        event = [fn for fn in blocks.fns.values() if fn.validator is block_fn.fn]
        block_fn = event[0] if event else block_fn
    return block_fn.api_name or "this event"


def _holds_file(value: Any) -> bool:
    """Whether ``value`` holds a file payload anywhere (what Gradio would move into its
    cache); walked without recursion, so no nesting depth can overflow the stack."""
    stack = [value]
    while stack:
        item = stack.pop()
        if is_file_obj_with_meta(item):
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


class PublicBlocks(gr.Blocks):
    """gr.Blocks whose events fill omitted inputs, refuse extra ones and any file that is not
    the visitor's own upload, and send skipped outputs without rebuilding them (see the
    module rule)."""

    async def process_api(self, block_fn: Any, inputs: list[Any], *args: Any, **kwargs: Any):
        """Gradio's processing, with the event's visitor known to ``preprocess_data``.

        Gradio hands the request to this method only; the upload rule needs its visitor."""
        request = kwargs.get("request", args[1] if len(args) > 1 else None)
        request = request[0] if isinstance(request, list) and request else request
        token = _visitor.set(request_visitor(request) if request is not None else "unknown")
        try:
            return await super().process_api(block_fn, inputs, *args, **kwargs)
        finally:
            _visitor.reset(token)

    async def preprocess_data(self, block_fn: Any, inputs: list[Any], *args: Any, **kwargs: Any):
        """Fill omitted trailing inputs, check the count, then apply the files rule before
        Gradio's preprocessing touches any path.

        No public hook runs earlier: Gradio moves every file payload of every input into its
        cache inside this method, before any validator or handler, and when called from the
        queue it may skip its own "was this uploaded?" check, which would copy any file the
        server can read (a raw call naming /etc/passwd did exactly that). A validator (a run
        joining the queue) checks the upload and leaves it for the event to read.
        """
        _fill_defaults(block_fn, inputs)
        self.validate_inputs(block_fn, inputs)
        names = _input_names(block_fn)
        read = not getattr(block_fn, "is_validator_function", False)
        for component, value, name in zip(block_fn.inputs, inputs, names, strict=False):
            try:
                if isinstance(component, gr.File):
                    # The page's own events take *args: the CSV input is known by its elem_id.
                    field = component.elem_id if component.elem_id in uploads.READ_HERE else name
                    uploads.admit(_visitor.get(), value, read=read, field=field)
                elif _holds_file(value):
                    _refuse_file(getattr(component, "elem_id", None), name, value)
            except ConfigError as error:
                raise Refusal(
                    str(error), title=f"Invalid {error.field}", print_exception=False
                ) from None
        return await super().preprocess_data(block_fn, inputs, *args, **kwargs)

    async def call_function(self, block_fn: Any, processed_input: list[Any], *args, **kwargs):
        """Gradio's call, in the event's lane (see the module rule).

        No public hook runs between an event leaving Gradio's queue and its handler: a lane
        held inside the handler would keep a worker thread waiting."""
        fn = self.fns[block_fn] if isinstance(block_fn, int) else block_fn
        requests = kwargs.get("requests", args[1] if len(args) > 1 else None)
        session = getattr(requests, "session_hash", None)
        parent = super()

        async def call() -> Any:
            return await parent.call_function(block_fn, processed_input, *args, **kwargs)

        return await in_lane(fn, processed_input, call, session)

    async def postprocess_data(self, block_fn: Any, predictions: Any, state: Any) -> list[Any]:
        """Gradio's postprocessing for the outputs that change; skips pass straight through.

        No public route skips the per-session rebuild: Gradio rebuilds every output answered
        with an update, a skip included (tests/app/test_skips.py checks the result is Gradio's).
        """
        if _is_skip(predictions) and len(block_fn.outputs) > 1:
            predictions = [predictions] * len(block_fn.outputs)  # one skip: skip every output
        elif (
            isinstance(predictions, dict)
            and predictions
            and all(isinstance(key, Block) for key in predictions)
        ):
            predictions = convert_component_dict_to_list(list(block_fn.outputs), predictions)
        if (
            block_fn.batch
            or len(block_fn.outputs) < 2
            or not isinstance(predictions, (list, tuple))
            or len(predictions) != len(block_fn.outputs)
        ):
            return await super().postprocess_data(block_fn, predictions, state)
        changed = [index for index, value in enumerate(predictions) if not _is_skip(value)]
        if len(changed) == len(predictions):
            return await super().postprocess_data(block_fn, predictions, state)
        output: list[Any] = [{"__type__": "update"} for _ in predictions]
        if changed:
            part = copy.copy(block_fn)
            part.outputs = [block_fn.outputs[index] for index in changed]
            values = [predictions[index] for index in changed]
            done = await super().postprocess_data(
                part, values if len(values) > 1 else values[0], state
            )
            for index, value in zip(changed, done, strict=True):
                output[index] = value
        return output

    def validate_inputs(self, block_fn: Any, inputs: list[Any]) -> None:
        """Name the missing inputs, or say how many the event takes when it got more. Gradio
        calls this inside ``preprocess_data``, before any validator; its own message prints
        Python objects, and it ignores extra inputs."""
        needed = len(block_fn.inputs)
        if len(inputs) == needed:
            return super().validate_inputs(block_fn, inputs)
        names = _input_names(block_fn)
        event = _event_name(self, block_fn)
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
