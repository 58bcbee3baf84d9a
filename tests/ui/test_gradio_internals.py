"""The canary of Gradio's internals (``playground.ui.gradio_internals``), pinned to its version.

An upgrade of Gradio fails here, in one place: its version is the pinned one, and every
internal name the package relies on still exists with the signature it is used with. Outside
the package, no module of the playground reaches past Gradio's public API, and the page's
Blocks override at most two of Gradio's methods.
"""

from __future__ import annotations

import ast
import asyncio
import concurrent.futures
import inspect
import pathlib

import gradio as gr
import gradio_client
import pytest
from gradio import queueing, route_utils
from gradio.server_messages import ProcessCompletedMessage

from playground.ui import gradio_internals
from playground.ui.gradio_internals import events
from playground.ui.gradio_internals import queue as gradio_queue
from playground.ui.gradio_internals.blocks import EventBlocks
from playground.ui.public import PublicBlocks

PACKAGE = pathlib.Path(gradio_internals.__file__).resolve().parents[3]
INTERNALS = pathlib.Path(gradio_internals.__file__).resolve().parent
# Attributes of Gradio's objects that only the internals read (their queue, their records).
PRIVATE_ATTRIBUTES = {
    "_queue",
    "fns",
    "_id",
    "is_validator_function",
    "event_queue_per_concurrency_id",
    "active_jobs",
    "pending_messages_per_session",
    "pending_event_ids_session",
    "event_ids_to_events",
    "pending_message_lock",
    "remove_from_queue",
}


def _parameters(function) -> list[str]:
    return list(inspect.signature(function).parameters)


def test_gradio_is_a_release_the_app_is_tested_on():
    assert gr.__version__ in gradio_internals.GRADIO_VERSIONS
    assert gradio_client.__version__ == "2.7.2"  # ui.client_refusals' reading of its joins


def test_the_two_overridden_methods_keep_their_signatures():
    assert _parameters(gr.Blocks.process_api)[:5] == [
        "self",
        "block_fn",
        "inputs",
        "state",
        "request",
    ]
    assert _parameters(gr.Blocks.process_api)[5] == "iterator"
    assert _parameters(gr.Blocks.postprocess_data) == ["self", "block_fn", "predictions", "state"]
    # Gradio's routes call process_api by keyword, the request and the session among them.
    source = inspect.getsource(route_utils.call_process_api)
    assert "process_api(" in source and "request=gr_request" in source


def _overrides(blocks: type) -> set[str]:
    """The methods of gr.Blocks that ``blocks`` itself defines anew."""
    return {
        name
        for name, value in vars(blocks).items()
        if hasattr(gr.Blocks, name)
        and inspect.isfunction(value)
        and value.__qualname__.startswith(f"{blocks.__name__}.")
    }


def test_the_page_overrides_at_most_two_of_gradios_methods():
    assert _overrides(EventBlocks) == {"process_api", "postprocess_data"}
    assert _overrides(PublicBlocks) == set()  # its rules are EventBlocks' hooks
    for method in ("process_api", "postprocess_data"):
        assert "Missing hook" in getattr(EventBlocks, method).__doc__


def _demo() -> gr.Blocks:
    with gr.Blocks() as demo:
        number, doubled = gr.Number(), gr.Number()
        gr.Button().click(
            lambda x: 2 * x,
            number,
            doubled,
            api_name="double",
            concurrency_id="lane",
            validator=lambda x: gr.validate(True, ""),
        )
    return demo.queue()


def test_an_events_record_has_what_the_app_reads():
    demo = _demo()
    fn = demo.fns[0]
    for name in ("api_name", "api_visibility", "concurrency_id", "inputs", "outputs", "batch"):
        assert hasattr(fn, name), name
    assert (fn.api_name, fn.concurrency_id, events.event_kind(fn)) == ("double", "lane", 0)
    assert events.event_of_join(demo, "/gradio_api/call/double", {}) is fn
    assert events.event_of_join(demo, "/gradio_api/queue/join", {"fn_index": 0}) is fn
    assert [p.name for p in events.handler_parameters(fn)] == ["x"]
    validator = queueing.create_validator_fn(fn)
    assert events.is_validator(validator) and not events.is_validator(fn)
    assert events.validated_event(demo, validator) is fn
    assert events.answering_skip(fn).fn(3) == gr.skip() and fn.fn(3) == 6


def test_the_queue_has_what_the_app_reads():
    demo = _demo()
    queue = gradio_queue.queue_of(demo)
    assert isinstance(queue, queueing.Queue)
    for name in PRIVATE_ATTRIBUTES - {"_queue", "fns", "_id", "is_validator_function"}:
        assert hasattr(queue, name), name
    assert _parameters(queue.remove_from_queue) == ["event_id"]
    assert inspect.iscoroutinefunction(queue.remove_from_queue)
    assert not gradio_queue.busy(queue) and gradio_queue.queued(queue) == []
    assert _parameters(queueing.Event.__init__)[:5] == [
        "self",
        "session_hash",
        "fn",
        "request",
        "username",
    ]
    event = queueing.Event("session", demo.fns[0], None, None)
    assert gradio_queue.event_fn(event) is demo.fns[0]
    assert gradio_queue.event_session(event) == "session"
    assert gradio_queue.event_inputs(event) == [] and gradio_queue.event_request(event) is None
    assert isinstance(gradio_queue.event_id(event), str)


def test_an_ended_event_is_put_on_its_sessions_stream_and_forgotten():
    queue = gradio_queue.queue_of(_demo())

    async def refuse() -> tuple[str, bool]:
        return await gradio_queue.end_on_stream(queue, "s", "no", "Refused")

    # In a thread of its own: a worker that also holds Playwright's sync loop refuses
    # asyncio.run on its own thread.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        event_id, opened = pool.submit(asyncio.run, refuse()).result()
    assert opened and gradio_queue.recorded_sessions(queue) == 1
    message = queue.pending_messages_per_session["s"].get_nowait()
    assert isinstance(message, ProcessCompletedMessage)
    assert (message.event_id, message.success, message.output["error"]) == (event_id, False, "no")
    assert gradio_queue.finished_sessions(queue) == ["s"]  # its message has been read
    gradio_queue.forget_stream(queue, "s", event_id)
    assert gradio_queue.recorded_sessions(queue) == 0


def _reaches_past(tree: ast.AST) -> list[str]:
    """What a module's code reads of Gradio's internals: an import of one of Gradio's
    submodules or of gradio_client, an attribute only the internals read, a method named as
    one of Blocks' own."""
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and (node.module.startswith(("gradio.", "gradio_client")))
        ):
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(("gradio.", "gradio_client"))]
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE_ATTRIBUTES:
            found.append(f".{node.attr} (line {node.lineno})")
    return found


@pytest.mark.parametrize(
    "path",
    sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in (PACKAGE / "playground").rglob("*.py")
        if INTERNALS not in path.parents
    )
    + ["app.py"],
)
def test_no_module_outside_the_internals_reaches_past_gradios_public_api(path):
    tree = ast.parse((PACKAGE / path).read_text())
    assert _reaches_past(tree) == [], path


# The one import of a Gradio submodule left in the whole package: the message that ends an event
# on its session's stream (gradio_internals.queue). A new one anywhere fails here.
SUBMODULE_IMPORTS = {
    "playground/ui/gradio_internals/queue.py": ["from gradio.server_messages import"]
}


def _submodule_imports(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            ("gradio.", "gradio_client.")
        ):
            found.append(f"from {node.module} import")
        elif isinstance(node, ast.Import):
            found += [
                alias.name
                for alias in node.names
                if alias.name.startswith(("gradio.", "gradio_client."))
            ]
    return found


@pytest.mark.parametrize(
    "path",
    sorted(path.relative_to(PACKAGE).as_posix() for path in (PACKAGE / "playground").rglob("*.py"))
    + ["app.py"],
)
def test_only_the_listed_modules_import_a_gradio_submodule(path):
    tree = ast.parse((PACKAGE / path).read_text())
    assert _submodule_imports(tree) == SUBMODULE_IMPORTS.get(path, []), path
