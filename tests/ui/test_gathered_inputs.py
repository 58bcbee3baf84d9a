"""A commit's controls gathered into one box (``ui.gathered_inputs``): the handler reads every
input in its order; the checks that go by control see each one inside the box."""

from __future__ import annotations

import functools
import json

import gradio as gr
import pytest
from cost_by_hand import compile_work_by_hand

from playground.core.settings.cost import step_work
from playground.core.settings.settings import StepConfig, defaults
from playground.ui import gathered_inputs
from playground.ui.arguments import STEP
from playground.ui.fair_use import HeavyRunMiddleware
from playground.ui.launch import carries_every_setting, event_work
from playground.ui.page import build_demo


def _tiny():
    with gr.Blocks() as demo:
        box = gathered_inputs.box()
        a, b = gr.Number(elem_id="a"), gr.Textbox(elem_id="b")
        state = gr.State("held")
        out = gr.Textbox()
        seen = []
        gathered = gathered_inputs.Gathered(
            box, lambda *v: seen.append(v) or "ok", [a, state, b], [out]
        )
        button = gr.Button()
        event = gathered.after(button.click, api_name="tiny")
    return demo, gathered, event, seen, (a, b, state)


def test_the_handler_reads_every_input_in_its_order_states_from_the_server():
    _, gathered, _, seen, (a, b, state) = _tiny()
    assert gathered.sent == [a, b] and gathered.kept == [state]
    assert gathered.server_handler({"values": [2.5, "x"]}, "held") == "ok"
    assert seen == [(2.5, "held", "x")]


DEEP = functools.reduce(lambda inner, _: [inner], range(500), [])


@pytest.mark.parametrize(
    ("box", "got"),
    [
        ([2.5, "x"], "a list without a list of values"),
        ({"values": [2.5]}, "1 value"),
        ({"values": [DEEP, 1, 2]}, "3 values"),
        ({"values": "2.5"}, "a dict without a list of values"),
        (None, "null"),
    ],
)
def test_a_box_without_one_value_per_control_is_refused_naming_it(box, got):
    """Named in a few words, never echoed (a payload of any depth or size)."""
    _, gathered, _, seen, _ = _tiny()
    with pytest.raises(gr.Error) as refused:
        gathered.server_handler(box, "held")
    assert refused.value.message == (
        "gathered-inputs takes the page's 2 control values in one list ({'values': [...]}), in "
        f"the order of the page's controls; got {got}"
    )
    assert seen == []


def test_the_browser_gathers_and_the_server_event_follows_it():
    demo, _, _, _, (a, b, _) = _tiny()
    config = demo.get_config_file()
    by_id = {dependency["id"]: dependency for dependency in config["dependencies"]}
    (server,) = [d for d in config["dependencies"] if d["api_name"] == "tiny"]
    gather = by_id[server["trigger_after"]]
    assert gather["backend_fn"] is False and gather["js"] == gathered_inputs.GATHER_JS
    assert gather["inputs"] == [a._id, b._id]
    assert len(server["inputs"]) == 2  # the box and the State


@pytest.fixture(scope="module")
def commit():
    fns = build_demo().fns
    return next(fn for fn in dict(fns).values() if fn.api_name == "on_commit")


def test_the_pages_commit_is_ordered_as_a_commit_of_every_setting(commit):
    # ui.launch: a commit the session sent before one that already ran is skipped
    assert carries_every_setting(commit)
    assert len(commit.inputs) < 10  # the box and the States, not the controls


def test_the_pages_commit_is_priced_by_the_settings_in_its_box(commit):
    """A deep nvfp4 MLP at a tiny batch: little work, but seconds of compile (by cost_by_hand),
    priced from the box as /step prices the same settings."""
    deep = {
        "n": 8,
        "d_in": 8,
        "d_out": 4,
        "model": "mlp",
        "hidden_layers": 8,
        "hidden_width": 8,
        "compute_dtype": "nvfp4",
    }
    gathered = commit.fn.gathered
    values = defaults() | {"data": None} | deep
    controls = [values.get(c.elem_id) for c in gathered.sent]
    states = [None] * len(gathered.kept)
    config = StepConfig(**deep)
    work = event_work(commit, [{"values": controls}, *states])
    assert work == step_work(config) + compile_work_by_hand("step", config)
    assert event_work(commit, [{"values": controls[:-1]}, *states]) == 0.0  # malformed
    assert {c.elem_id for c in gathered.sent} >= set(STEP.fields)


def _join(demo, fn, data) -> bytes:
    index = next(i for i, event in demo.fns.items() if event is fn)
    return json.dumps({"fn_index": index, "session_hash": "s", "data": data}).encode()


@pytest.mark.parametrize(
    ("number", "read"),
    [(1, 1), (7, 7), (0, None), (-3, None), (True, None), (7.0, None), ("7", None), (None, None)],
)
def test_the_join_reads_the_pages_number_from_a_gathered_commits_box(number, read):
    """The order the page sent its commits in travels in the box (``SENT``); the join
    middleware reads it there, a positive whole number or nothing."""
    demo, *_ = _tiny()
    server = next(fn for fn in demo.fns.values() if gathered_inputs.is_gathered(fn))
    box = {"values": [1, "x"]} | ({} if number is None else {gathered_inputs.SENT: number})
    middleware = HeavyRunMiddleware(app=None, blocks=demo)
    fn, session, sent = middleware._event("/gradio_api/queue/join", _join(demo, server, [box]))
    assert (fn, session, sent) == (server, "s", read)


def test_an_event_without_a_box_carries_no_number_whatever_its_first_input():
    with gr.Blocks() as demo:
        a, out = gr.JSON(), gr.Textbox()
        gr.Button().click(lambda value: "ok", a, out)
    (fn,) = demo.fns.values()
    middleware = HeavyRunMiddleware(app=None, blocks=demo)
    data = [{"values": [], gathered_inputs.SENT: 4}]
    assert middleware._event("/gradio_api/queue/join", _join(demo, fn, data))[2] is None
