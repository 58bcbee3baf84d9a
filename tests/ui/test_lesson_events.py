"""One chain of events per family of buttons (``ui.examples``' rule, ``ui.route``): the page's
event count stays small, and the chain's handlers tell the clicked button from the event's
``gr.EventData``, as Gradio fills it, never from a label."""

from __future__ import annotations

from types import SimpleNamespace

import gradio as gr
import pytest
from gradio.helpers import special_args

from playground.core.lessons import (
    DYNAMICS_LESSONS,
    ENDING_LESSONS,
    PRECISION_LESSONS,
    STEP_LESSONS,
    TRANSFORMER_LESSONS,
)
from playground.core.lessons import LESSONS as ALL_LESSONS
from playground.ui import examples, page_events, route
from playground.ui.page import build_demo

# The page's events (listeners Gradio registers, the browser-only ones included) on its first
# load. Issue 52 asks for at most 60: one chain per family of triggers (the lesson buttons with
# the route's) brings it there.
MAX_EVENTS = 60
STEP_BUTTONS = [
    f"lesson-{lesson.id}"
    for lesson in (*STEP_LESSONS, *PRECISION_LESSONS, *TRANSFORMER_LESSONS, *ENDING_LESSONS)
]
TRAINING_BUTTONS = [f"lesson-{lesson.id}" for lesson in DYNAMICS_LESSONS]
ROUTE_TRIGGERS = {("route-next", "click"), ("route-prev", "click"), ("route-select", "input")}


@pytest.fixture(scope="module")
def built(request):
    """The page built with each lesson's run replaced by a record of the lesson asked for (a
    real run of every lesson takes minutes), and its config."""
    patch = pytest.MonkeyPatch()
    asked = []

    def run_lesson(lesson, last, shown=None):
        asked.append(lesson)
        return {"caption": gr.update(value=lesson.label, visible=True)}

    patch.setattr(page_events, "run_lesson", run_lesson)
    patch.setattr(route, "view", lambda index: {"claim": f"chapter {index}"})
    patch.setattr(examples, "trained", lambda lesson_id, pins: {"button": lesson_id})
    request.addfinalizer(patch.undo)
    demo = build_demo()
    return SimpleNamespace(demo=demo, config=demo.get_config_file(), asked=asked)


def _elem_ids(config) -> dict[int, str | None]:
    return {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}


def _triggered_by(config, elem_ids: set[str]) -> list[dict]:
    """The events one of whose triggers is a component among ``elem_ids``."""
    names = _elem_ids(config)
    return [
        dependency
        for dependency in config["dependencies"]
        if any(names.get(target) in elem_ids for target, _ in dependency["targets"])
    ]


def test_the_page_registers_at_most_the_stated_number_of_events(built):
    assert len(built.config["dependencies"]) <= MAX_EVENTS


@pytest.mark.parametrize(
    ("buttons", "others"),
    [(STEP_BUTTONS, ROUTE_TRIGGERS), (TRAINING_BUTTONS, set())],
    ids=["step", "training"],
)
def test_every_lesson_button_of_a_row_triggers_one_chain(built, buttons, others):
    """One event listens to every button's click (the browser's gather), the step lessons' with
    the route's triggers; the rest follows it."""
    names = _elem_ids(built.config)
    (first,) = _triggered_by(built.config, set(buttons))
    assert sorted((names[target], event) for target, event in first["targets"]) == sorted(
        [(button, "click") for button in buttons] + list(others)
    )
    # The server's event follows it, and runs for every click (never deferred: see the rule).
    (server,) = [d for d in built.config["dependencies"] if d.get("trigger_after") == first["id"]]
    assert server["backend_fn"] and server["trigger_mode"] == "multiple"


def test_the_routes_triggers_share_the_lessons_chain_and_one_view(built):
    """Each trigger's own instant answer in the browser, one view for the three, and the step
    lessons' gather for the chapter's step."""
    names = _elem_ids(built.config)
    events = _triggered_by(built.config, {"route-next", "route-prev", "route-select"})
    shared = [d for d in events if len(d["targets"]) > 1]
    own = [d for d in events if len(d["targets"]) == 1]
    assert len(shared) == 2 and len(own) == 3
    targets = [{(names[t], e) for t, e in dependency["targets"]} for dependency in shared]
    lessons = {(button, "click") for button in STEP_BUTTONS}
    assert sorted(targets, key=len) == [ROUTE_TRIGGERS, ROUTE_TRIGGERS | lessons]
    assert {(names[t], e) for d in own for t, e in d["targets"]} == ROUTE_TRIGGERS


def _server_event(built, first_trigger: str):
    """The registered server event that follows the browser's gather on ``first_trigger``."""
    (gather,) = [
        d
        for d in _triggered_by(built.config, {first_trigger})
        if len(d["targets"]) > 1 and not d["backend_fn"]
    ]
    (server,) = [d for d in built.config["dependencies"] if d.get("trigger_after") == gather["id"]]
    return built.demo.fns[server["id"]]


def _call(fn, button, data=None):
    """Call ``fn`` as Gradio does for a click on ``button``: its raw inputs (the gathered box
    with each control's initial value, the States as None), the event's data filled in by
    Gradio's own reading of the handler's annotations."""
    inputs = data
    if inputs is None:
        gathered = fn.fn.gathered
        box = {"values": [getattr(component, "value", None) for component in gathered.sent]}
        inputs = [box, *[None] * len(gathered.kept)]
    filled, *_ = special_args(fn.fn, list(inputs), event_data=gr.EventData(button, {}))
    return fn.fn(*filled)


def _button(built, elem_id: str):
    """The page's component ``#elem_id``."""
    return next(
        block for block in built.demo.blocks.values() if getattr(block, "elem_id", "") == elem_id
    )


@pytest.mark.parametrize("elem_id", STEP_BUTTONS)
def test_the_step_lessons_event_runs_the_lesson_of_the_button_clicked(built, elem_id):
    lesson = ALL_LESSONS[elem_id.removeprefix("lesson-")]
    built.asked.clear()
    answer = _call(_server_event(built, STEP_BUTTONS[0]), _button(built, elem_id))
    assert built.asked == [lesson]
    ids = {getattr(component, "elem_id", None): value for component, value in answer.items()}
    # Where the page then scrolls, as the hidden JSON box shows it.
    box = _button(built, examples.SCROLL_TARGET_ID)
    shown = box.postprocess(ids[examples.SCROLL_TARGET_ID]).model_dump()
    assert shown == {"elem_id": lesson.target}


@pytest.mark.parametrize("elem_id", TRAINING_BUTTONS)
def test_the_training_lessons_events_run_and_mark_the_button_clicked(built, elem_id):
    lesson = ALL_LESSONS[elem_id.removeprefix("lesson-")]
    built.asked.clear()
    button = _button(built, elem_id)
    answer = _call(_server_event(built, TRAINING_BUTTONS[0]), button)
    (asked,) = built.asked
    assert (asked.id, asked.overrides) == (lesson.id, lesson.step_overrides)
    ids = {getattr(component, "elem_id", None): value for component, value in answer.items()}
    assert all(ids[name] == value for name, value in lesson.run_inputs.items())
    # Training: the clicked button alone among the outputs it answers.
    train = next(fn for fn in built.demo.fns.values() if fn.name == "on_train")
    trained = _call(train, button, data=[[]])
    assert [c for c in trained if c in train.outputs[-len(TRAINING_BUTTONS) :]] == [button]
    assert trained[button] == lesson.id


def test_an_event_no_lesson_button_sent_is_refused(built):
    fn = _server_event(built, STEP_BUTTONS[0])
    with pytest.raises(gr.Error, match="lesson button; got lr"):
        _call(fn, _button(built, "lr"))
    with pytest.raises(gr.Error, match="lesson button; got pin-run"):
        _call(fn, _button(built, "pin-run"))
    with pytest.raises(gr.Error, match="lesson button; got none"):
        _call(fn, None)


@pytest.mark.parametrize(
    ("elem_id", "opened"), [("route-next", 2), ("route-prev", 0), ("route-select", 1)]
)
def test_the_routes_event_opens_the_chapter_its_trigger_names(built, elem_id, opened):
    """From chapter 2 on the picker: next opens chapter 3, previous chapter 1, the picker its
    own."""
    open_event = _server_event(built, "route-next")
    gathered = open_event.fn.gathered
    box = {
        "values": [
            route.CHOICES[1] if c is gathered.inputs[0] else getattr(c, "value", None)
            for c in gathered.sent
        ]
    }
    answer = _call(open_event, _button(built, elem_id), [box, *[None] * len(gathered.kept)])
    assert answer[_button(built, "route-select")] == route.CHOICES[opened]
    # The page then scrolls to the chapter's question, as the hidden JSON box shows it.
    box = _button(built, examples.SCROLL_TARGET_ID)
    shown = box.postprocess(answer[box]["value"]).model_dump()
    assert shown == {"elem_id": "route-chapter"}
    view = next(fn for fn in built.demo.fns.values() if fn.name == "on_view")
    shown = _call(view, _button(built, elem_id), data=[route.CHOICES[1]])
    claim = _button(built, "route-claim")
    assert shown == {claim: f"chapter {opened}"}


@pytest.mark.parametrize(
    ("elem_id", "power", "label"),
    [("loss-scale-exponent", 3, None), ("loss-scale-presets", None, "2^15")],
)
def test_the_loss_scale_event_reads_the_control_used(built, elem_id, power, label):
    """One chain for the exponent and the presets: the one used sets the loss scale."""
    (dependency,) = [
        d for d in built.config["dependencies"] if d["api_name"] == "preset_loss_scale"
    ]
    fn = built.demo.fns[dependency["id"]]
    gathered = fn.fn.gathered
    exponent, presets = gathered.inputs[:2]
    given = {id(exponent): power, id(presets): label}
    box = {"values": [given.get(id(c), getattr(c, "value", None)) for c in gathered.sent]}
    answer = _call(fn, _button(built, elem_id), [box, *[None] * len(gathered.kept)])
    expected = 2.0**3 if power is not None else 2.0**15
    assert answer[_button(built, "loss_scale")] == expected
