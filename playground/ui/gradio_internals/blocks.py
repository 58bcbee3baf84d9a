"""The two overrides of ``gr.Blocks``' event path, each where Gradio (6.31) has no hook.

  process_api      the one method that receives a call's inputs, before Gradio touches them,
                   together with its request (the client) and its session, and that wraps
                   preprocessing, the handler and postprocessing; it runs the subclass's
                   ``admit`` first, then Gradio's processing inside the subclass's ``lane``
                   (a scheduling hook: where and when the call may run);
  postprocess_data an output answered with gr.skip() passes straight through, without the
                   per-session rebuild Gradio gives every update it postprocesses.

Everything else the app asks of an event (its API name, its ``concurrency_id`` and
``concurrency_limit``, ``trigger_mode``, a ``validator``, a ``request: gr.Request`` parameter)
goes through Gradio's public event listeners.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import gradio as gr

from playground.ui.gradio_internals.events import answering_skip, is_validator, with_outputs

Run = Callable[[], Awaitable[Any]]
SKIP = {"__type__": "update"}  # gr.skip(): an update that names no property


def _is_skip(value: Any) -> bool:
    return isinstance(value, dict) and value == SKIP


def _in_order(outputs: list[Any], predictions: dict[Any, Any]) -> list[Any] | None:
    """An answer given as {component: value} as a list in the order of ``outputs``, a skip for
    each output it leaves out (as Gradio reads such an answer); None when a key is no output."""
    position = {id(block): index for index, block in enumerate(outputs)}
    if not all(id(key) in position for key in predictions):
        return None
    answer: list[Any] = [dict(SKIP) for _ in outputs]
    for block, value in predictions.items():
        answer[position[id(block)]] = value
    return answer


class EventBlocks(gr.Blocks):
    """gr.Blocks whose calls pass the subclass's ``admit`` and ``lane`` and whose skipped
    outputs are sent as such (see the module rule)."""

    def admit(self, fn: Any, inputs: list[Any], request: gr.Request | None) -> None:
        """Check one call of the event ``fn`` before Gradio touches its raw ``inputs`` (which
        it may complete in place); raise gr.Error to refuse it. Admits everything here."""

    async def lane(
        self, fn: Any, inputs: list[Any], session: str | None, run: Run, skip: Run
    ) -> Any:
        """Await ``run()`` (Gradio's processing of the call) once the subclass's scheduling
        allows, or ``skip()`` (the same call answering gr.skip()) instead. Runs at once here."""
        return await run()

    async def process_api(
        self,
        block_fn: Any,
        inputs: list[Any],
        state: Any = None,
        request: Any = None,
        iterator: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> dict[str, Any]:
        """Gradio's processing of one call, after ``admit`` and inside ``lane`` (a validator's
        call, when a run joins the queue, is admitted and runs at once).

        Missing hooks: no public hook runs before ``preprocess_data``, which checks only that
        enough inputs came (its message prints Python objects; extra inputs are ignored) and
        moves every file payload into Gradio's cache, from the queue without its "was this
        uploaded?" check (a raw call naming /etc/passwd had it copied); and none runs between
        an event leaving the queue and its handler, where a lock taken inside the threaded
        handler would keep a worker thread waiting. Only this method gets the request too.
        """
        fn = self.fns[block_fn] if isinstance(block_fn, int) else block_fn
        if fn.batch or iterator is not None:  # no such event on this page: Gradio's own path
            return await super().process_api(fn, inputs, state, request, iterator, *args, **kwargs)
        first = request[0] if isinstance(request, list) and request else request
        self.admit(fn, inputs, first)
        parent = super()

        async def run(event: Any = fn) -> dict[str, Any]:
            return await parent.process_api(event, inputs, state, request, None, *args, **kwargs)

        if is_validator(fn):
            return await run()
        session = getattr(first, "session_hash", None)
        return await self.lane(fn, inputs, session, run, lambda: run(answering_skip(fn)))

    async def postprocess_data(self, block_fn: Any, predictions: Any, state: Any) -> list[Any]:
        """Gradio's postprocessing for the outputs that change; skips pass straight through.

        Missing hook: Gradio rebuilds the session's copy of every output answered with an
        update, a skip included, so an event with many outputs, most of them unchanged, would
        spend far longer here than in its handler (tests/app/test_skips.py checks the answer
        is Gradio's own).
        """
        if _is_skip(predictions) and len(block_fn.outputs) > 1:
            predictions = [predictions] * len(block_fn.outputs)  # one skip: skip every output
        elif (
            isinstance(predictions, dict)
            and predictions
            and not any(isinstance(key, str) for key in predictions)
        ):
            predictions = _in_order(list(block_fn.outputs), predictions) or predictions
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
        output: list[Any] = [dict(SKIP) for _ in predictions]
        if changed:
            part = with_outputs(block_fn, [block_fn.outputs[index] for index in changed])
            values = [predictions[index] for index in changed]
            done = await super().postprocess_data(
                part, values if len(values) > 1 else values[0], state
            )
            for index, value in zip(changed, done, strict=True):
                output[index] = value
        return output
