"""The page's typed keys: a field's notice and its control are two outputs, never one."""

from __future__ import annotations

from playground.ui import page_events
from playground.ui.arguments import STEP
from playground.ui.components import Chart, Control, Notice


def test_keys_of_different_kinds_never_collide():
    keys = {Notice("n"): "notice", Control("n"): "control", Chart("n"): "chart", "n": "name"}
    assert len(keys) == 4
    assert keys[Notice("n")] == "notice" and keys[Control("n")] == "control"


def test_a_lesson_answers_every_control_and_every_notice():
    outputs = set(page_events.LESSON_OUTPUTS)
    assert len(outputs) == len(page_events.LESSON_OUTPUTS)
    for name in STEP.order:
        assert Control(name) in outputs and Notice(name) in outputs, name
