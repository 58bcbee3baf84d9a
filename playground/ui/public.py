"""PublicBlocks: the few places where the page needs Gradio's event path itself.

Each override exists because Gradio offers no public hook at that point (checked against
Gradio 6.31); tests/app/test_skips.py compares the skips with Gradio's own postprocessing.

Rules:
  arity       omitted trailing inputs take their defaults, as through gradio_client, so an
              older raw HTTP call keeps working after inputs were appended; an input with no
              default that is missing is refused with a message that names it, instead of
              Gradio's, which prints Python objects.
  files       a file input must name a file in Gradio's upload folder, checked before Gradio
              copies it into its cache (so a raw call cannot make the server read other files).
  lanes       each event's handler is called in its lane (``ui.launch.in_lane``): large work
              waits for the one large lane, so it never sits in front of small requests.
  skips       an output answered with gr.skip() (an update naming no property) is sent as
              such without touching the session: Gradio would rebuild that component for the
              session (about 1 ms each), which made an event with many outputs, most of them
              unchanged, spend 60-130 ms here instead of the handler's 3 ms.
"""

from __future__ import annotations

import copy
import inspect
from pathlib import Path
from typing import Any

import gradio as gr
from gradio.blocks import Block, convert_component_dict_to_list
from gradio.utils import get_upload_folder, is_in_or_equal

from playground.core.settings import shown
from playground.ui.launch import in_lane


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


class PublicBlocks(gr.Blocks):
    """gr.Blocks whose events fill omitted inputs, refuse file paths that are no upload, and
    send skipped outputs without rebuilding them (see the module rule)."""

    async def preprocess_data(self, block_fn: Any, inputs: list[Any], *args: Any, **kwargs: Any):
        """Fill omitted trailing inputs; refuse a file payload whose path is not an upload,
        before Gradio copies it.

        No public hook runs earlier: Gradio moves every input file into its cache inside this
        method, before any validator or handler, and when called from the queue it may skip its
        own "was this uploaded?" check, which would copy any file the server can read (a raw
        call naming /etc/passwd did exactly that).
        """
        _fill_defaults(block_fn, inputs)
        for component, value in zip(block_fn.inputs, inputs, strict=False):
            if not isinstance(component, gr.File) or value in (None, "", [], {}):
                continue
            path = value.get("path") if isinstance(value, dict) else None
            if not isinstance(path, str) or not is_in_or_equal(
                Path(path).resolve(), get_upload_folder()
            ):
                raise gr.Error(
                    f"data must be a CSV file uploaded to this page, or empty; got {shown(value)}",
                    title="Invalid data",
                    print_exception=False,
                )
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
        """Name the missing inputs. Gradio calls this inside ``preprocess_data``, before any
        validator, and its own message prints Python objects."""
        needed = len(block_fn.inputs)
        if len(inputs) >= needed:
            return super().validate_inputs(block_fn, inputs)
        names = [parameter.name for parameter in _parameters(block_fn)][:needed]
        missing = ", ".join(names[len(inputs) :])
        raise gr.Error(
            f"{block_fn.api_name or 'this event'} takes {needed} inputs "
            f"({', '.join(names)}); got {len(inputs)}, missing {missing}. gradio_client fills "
            "omitted trailing inputs with their defaults; a raw HTTP call must send them all.",
            title="Missing inputs",
            print_exception=False,
        )
