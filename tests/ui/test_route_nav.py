"""The route's header and the settings a chapter applies (playground.ui.route), without a
server: where the learner is, previous / next at both ends, a training chapter's step part."""

import json

import gradio as gr

from playground.core.lessons import LESSONS, RUN_FIELDS
from playground.core.lessons.route import CHAPTERS, ROUTE
from playground.ui import route


def test_the_header_says_where_the_learner_is_and_what_comes_next():
    first = route.nav(0)
    assert first["counter"]["value"] == f"Chapter 1 of {len(ROUTE)}"
    assert first["prev"]["visible"] is False
    assert first["next"] == f"Next: 2. {ROUTE[1].title}"
    assert first["select"] == f"1. {ROUTE[0].title}"
    last = route.nav(len(ROUTE) - 1)
    assert last["prev"]["visible"] is True
    # The last chapter sums the route up; its Next starts again from chapter 1.
    assert last["next"] == f"Start again: 1. {ROUTE[0].title}"


def test_the_chapters_area_says_what_it_computes_while_it_opens():
    # chapter 3: its step at S = 2^15, the step it is read against, then both training runs
    shown = route.working_text(ROUTE.index(CHAPTERS["float16-loss-scale"]))
    assert shown.startswith(
        "**float16 with a loss scale**: computing one step (float16, S = 32768)"
    )
    steps = LESSONS["train-float16-scaled"].config().steps
    assert f"a training run of {steps} steps (float16, S = 32768)" in shown
    assert "one step (float16, S = 1)" in shown
    # In the browser, at once: the busy mark, and the text of the chapter the button opens.
    opening = route.opening_js(1)
    assert route.BUSY_CLASS in opening and "classList.add" in opening
    assert json.dumps(shown) in opening and "classList.remove" in route.OPENED_JS


def test_a_chapter_applies_its_lessons_step_settings():
    assert route.step_lesson("float16-scaled") is LESSONS["float16-scaled"]
    training = LESSONS[CHAPTERS["dynamic-scaling"].lesson]
    part = route.step_lesson(training.id)
    assert part.label == training.label and part.overrides == training.step_overrides
    assert not set(part.overrides) & set(RUN_FIELDS)
    assert route.START_LABEL.startswith(f"Start here: chapter 1 of {len(ROUTE)}")


def test_a_cleared_chapter_picker_opens_nothing_and_changes_no_result():
    """A picker emptied (by the keyboard, say) names no chapter: the page's event answers only
    its stale checks (the route's header, the step's results and the controls stay)."""
    from playground.ui.page import build_demo

    demo = build_demo()
    # One event serves the lessons, previous, next and the picker: the event's data names the
    # picker.
    pick = next(fn for fn in dict(demo.fns).values() if fn.name == "on_lesson")
    gathered = pick.fn.gathered
    picked = gr.EventData(gathered.inputs[0], {})
    values = [None if c is gathered.inputs[0] else getattr(c, "value", None) for c in gathered.sent]
    answer = pick.fn(picked, {"values": values}, *[None] * len(gathered.kept))
    ids = {getattr(component, "elem_id", None) for component in answer}
    assert not ids & {"route-counter", "route-chapter", "route-claim", "headline", "lr"}
    assert all(update == {"__type__": "update"} or "value" in update for update in answer.values())
    # ... and no scroll: the box the page's scroll reads names nothing.
    (scroll,) = [value for c, value in answer.items() if c.elem_id == "lesson-scroll-target"]
    assert scroll["value"] is None
    view = next(fn for fn in dict(demo.fns).values() if fn.name == "on_view")
    assert view.fn(None, picked) == {"__type__": "update"}
    # Next before the first chapter opens chapter 1; after the last, chapter 1 again.
    assert route.target(1, None) == 0 and route.target(1, route.CHOICES[-1]) == 0
    assert route.target(-1, route.CHOICES[1]) == 0 and route.target(None, None) == -1
