"""PublicBlocks' postprocessing: an output answered with gr.skip() passes straight through.

Checked against Gradio's own postprocessing (gr.Blocks) on the same event: the same values go
to the browser, and the skipped component's session copy is never rebuilt.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import gradio as gr
from gradio.state_holder import SessionState

from playground.ui.public import PublicBlocks


def _event(blocks_class):
    with blocks_class() as demo:
        trigger = gr.Button()
        texts = [gr.Markdown(f"text {index}") for index in range(3)]
        notice = gr.Markdown(visible=False)
        trigger.click(lambda: None, None, [*texts, notice])
    return demo, demo.fns[0], texts, notice


def _run(coroutine):
    """Run ``coroutine`` to its end in a thread of its own: the browser tests' Playwright may
    hold an event loop in this one."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _answer(blocks_class, predictions):
    demo, block_fn, texts, notice = _event(blocks_class)
    state = SessionState(demo)
    by_name = {"text 0": texts[0], "text 1": texts[1], "text 2": texts[2], "notice": notice}
    resolved = {by_name[name]: value for name, value in predictions.items()}
    output = _run(demo.postprocess_data(block_fn, resolved, state))
    return output, state, by_name


def test_skips_and_values_reach_the_browser_as_gradio_sends_them():
    # A new dict per call: Gradio pops the value out of an update it postprocesses.
    def predictions():
        return {"text 1": "new", "notice": gr.update(value="bad lr", visible=True)}

    ours, _, _ = _answer(PublicBlocks, predictions())
    gradios, _, _ = _answer(gr.Blocks, predictions())
    assert ours == gradios
    assert ours[0] == ours[2] == {"__type__": "update"}
    assert ours[1] == "new"
    assert ours[3]["value"] == "bad lr" and ours[3]["visible"] is True


def _session_copy(state, block):
    return state.blocks_config.blocks.get(block._id)


def test_a_skipped_component_is_not_rebuilt_for_the_session():
    _, state, by_name = _answer(PublicBlocks, {"text 1": "new"})
    assert _session_copy(state, by_name["text 0"]) is by_name["text 0"]
    # Gradio's own postprocessing rebuilds every skipped component for the session.
    _, state, by_name = _answer(gr.Blocks, {"text 1": "new"})
    rebuilt = _session_copy(state, by_name["text 0"])
    assert rebuilt is not by_name["text 0"] and isinstance(rebuilt, gr.Markdown)


def test_an_answer_of_skips_only_changes_nothing():
    ours, state, by_name = _answer(PublicBlocks, {"text 0": gr.skip()})
    assert ours == [{"__type__": "update"}] * 4
    assert all(_session_copy(state, block) is block for block in by_name.values())


def test_a_lone_skip_skips_every_output():
    demo, block_fn, texts, notice = _event(PublicBlocks)
    state = SessionState(demo)
    ours = _run(demo.postprocess_data(block_fn, gr.skip(), state))
    assert ours == [{"__type__": "update"}] * 4
    assert all(_session_copy(state, block) is block for block in (*texts, notice))
