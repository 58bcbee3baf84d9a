"""The page's typed keys: a field's notice and its control are two outputs, never one; answers
by key merge into one update per component."""

from __future__ import annotations

import gradio as gr

from playground.ui import page_events
from playground.ui.arguments import STEP
from playground.ui.components import Chart, Control, Notice, Page, StaleCheck, merged


def test_keys_of_different_kinds_never_collide():
    keys = {Notice("n"): "notice", Control("n"): "control", Chart("n"): "chart", "n": "name"}
    assert len(keys) == 4
    assert keys[Notice("n")] == "notice" and keys[Control("n")] == "control"


def test_a_lesson_answers_every_control_and_the_data_notice():
    outputs = set(page_events.LESSON_OUTPUTS)
    assert len(outputs) == len(page_events.LESSON_OUTPUTS)
    for name in STEP.order:
        assert Control(name) in outputs, name
    # Only the upload, which has no help line of its own, keeps a notice component.
    assert {key for key in outputs if isinstance(key, Notice)} == {Notice("data")}


def test_merged_answers_keep_every_property_each_sets():
    value_then_message = merged({"lr": 0.1}, {"lr": gr.update(info="bad", elem_classes=["x"])})
    assert value_then_message == {
        "lr": {"__type__": "update", "value": 0.1, "info": "bad", "elem_classes": ["x"]}
    }
    # The later answer's property wins where both set one; other keys pass through as given.
    later = merged({"lr": gr.update(info="a")}, {"lr": gr.update(info="b"), "n": 3})
    assert later == {"lr": {"__type__": "update", "info": "b"}, "n": 3}
    # A dict value that is no update (the JSON summary) is a value, not properties.
    assert merged({"summary": {"a": 1}}, {"summary": gr.update(visible=True)}) == {
        "summary": {"__type__": "update", "value": {"a": 1}, "visible": True}
    }


def _page_with(checks: list[StaleCheck]) -> Page:
    page = Page(*[None] * 18)
    page.checks = checks
    return page


def test_a_commit_answers_each_check_with_its_inputs_as_the_answer_leaves_them():
    lr, n, banner, ran_with, other = (object() for _ in range(5))
    seen = []

    def check(lr_value, ran):
        seen.append((lr_value, ran))
        return f"lr {lr_value} vs {ran}"

    def handler(lr_value, n_value):  # sets n, leaves lr as sent; an update sets lr's value
        return {n: 7, other: {"__type__": "update", "visible": True}}

    page = _page_with([StaleCheck(check, (lr, ran_with), (banner,))])
    fn, inputs, outputs = page.with_checks(handler, [lr, n], [n, other])
    assert inputs == [lr, n, ran_with] and outputs == [n, other, banner]
    assert fn(0.5, 3, 0.1) == {
        n: 7,
        other: {"__type__": "update", "visible": True},
        banner: "lr 0.5 vs 0.1",
    }

    def setting_lr(lr_value, n_value):
        return {lr: {"__type__": "update", "value": 0.25}}

    fn, _, _ = page.with_checks(setting_lr, [lr, n], [lr])
    assert fn(0.5, 3, 0.1)[banner] == "lr 0.25 vs 0.1"

    def skipping(lr_value, n_value):  # changes nothing: the check still answers
        return {"__type__": "update"}

    fn, _, _ = page.with_checks(skipping, [lr, n], [])
    assert fn(0.5, 3, 0.1) == {banner: "lr 0.5 vs 0.1"}
    assert seen == [(0.5, 0.1), (0.25, 0.1), (0.5, 0.1)]


def test_a_check_of_two_outputs_answers_both_and_shared_inputs_are_read_once():
    lr, status, rerun = object(), object(), object()
    page = _page_with(
        [
            StaleCheck(lambda value: (f"status {value}", value > 0), (lr,), (status, rerun)),
            StaleCheck(lambda value: f"again {value}", (lr,), (status,)),
        ]
    )
    fn, inputs, outputs = page.with_checks(lambda value: {}, [lr], [])
    assert inputs == [lr] and outputs == [status, rerun]
    assert fn(2) == {status: "again 2", rerun: True}
