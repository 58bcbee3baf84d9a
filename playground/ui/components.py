"""The page's components, held by name in typed records, and the keys its events answer with.

Rule: a page event answers with a dict keyed by what it changes: a ``Notice``, ``Control`` or
``Chart`` key for one member of a family (the notice under field ``lr``, the control of ``lr``,
the chart ``loss_plot``), or the name of one of the Page's own components (``"headline"``).
``Page[key]`` is the component a key names, so the wiring never builds a name from a prefix.
Keys of different kinds never compare equal (``Notice("n") != Control("n")``).

A ``StaleCheck`` is a section's check of the results it shows against the controls (a stale
banner): every page event that commits settings runs each check in its own answer, with the
check's inputs as that answer leaves them, instead of one more event per check and commit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gradio as gr

from playground.ui import gathered_inputs
from playground.ui.gathered_inputs import Gathered


@dataclass(frozen=True)
class Notice:
    """The notice under a field's control (the data upload's: every other control holds its
    message in its own help line)."""

    field: str


@dataclass(frozen=True)
class Control:
    """A field's control."""

    field: str


@dataclass(frozen=True)
class Chart:
    """A chart of the report, by its output name."""

    name: str


Key = Notice | Control | Chart | str


@dataclass(frozen=True)
class StaleCheck:
    """``fn(*values of inputs)`` -> the values of ``outputs`` (one value when one output): a
    section's banner over results that no longer match the controls (see the module rule)."""

    fn: Callable[..., Any]
    inputs: tuple[Any, ...]
    outputs: tuple[Any, ...]


@dataclass
class Page:
    """Every component the page's own events read or write (see the module rule).

    ``controls`` are keyed by field name (``data`` included), ``notices`` hold the data upload's
    (every other control shows its message in its own help line); ``charts`` holds
    the report's charts on the page (above the tabs and in each section's tabs).
    """

    demo: gr.Blocks
    controls: dict[str, Any]
    notices: dict[str, gr.Markdown]  # the data upload's
    loss_scale_exponent: gr.Slider
    loss_scale_presets: gr.Radio
    example_buttons: dict[str, gr.Button]  # by lesson id
    status: gr.Markdown
    headline: gr.Markdown
    magnitudes: gr.Markdown
    reading: gr.Markdown
    operations: gr.Markdown  # the step's operations table, with the headline's numbers
    caption: gr.Markdown
    tabs: gr.Tabs
    summary: gr.JSON
    last_valid: gr.State
    open_tab: gr.State
    drawn: gr.State  # tab -> the inputs its charts show
    notices_shown: gr.State  # the fields whose message is on the page
    charts: dict[str, gr.Plot] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)  # each section's record, by label
    route: Any = None  # the route's record (ui.route)
    # The hidden box a commit's controls are gathered into in the browser (ui.gathered_inputs).
    gathered: Any = None
    checks: list[StaleCheck] = field(default_factory=list)  # run by every commit
    # Hidden: names what the lesson just run points at ({"elem_id": ...}), for the page's scroll.
    scroll_target: Any = None

    def __getitem__(self, key: Key) -> Any:
        if isinstance(key, Notice):
            return self.notices[key.field]
        if isinstance(key, Control):
            return self.controls[key.field]
        if isinstance(key, Chart):
            return self.charts[key.name]
        return getattr(self, key)

    def inputs(self, names: tuple[str, ...]) -> list[Any]:
        """The controls of fields ``names`` (an endpoint's inputs, in its order)."""
        return [self.controls[name] for name in names]

    def gathering(
        self, handler: Callable[..., Any], inputs: list[Any], outputs: list[Any]
    ) -> Gathered:
        """A commit event with its checks (``with_checks``), its controls gathered in the
        browser into the page's box (``ui.gathered_inputs``): wire it with ``.after``. A
        handler with a parameter annotated ``gr.EventData`` gets the event's by that name."""
        event = gathered_inputs.event_parameter(handler)
        return Gathered(self.gathered, *self.with_checks(handler, inputs, outputs), event)

    def with_checks(
        self, handler: Callable[..., Any], inputs: list[Any], outputs: list[Any]
    ) -> tuple[Callable[..., Any], list[Any], list[Any]]:
        """A commit event's (fn, inputs, outputs), every check in ``checks`` run in its answer.

        The inputs the checks read that the event does not are appended to its inputs, their
        outputs to its outputs; keyword arguments (the event's ``gr.EventData``) go to
        ``handler`` as they come. ``handler`` answers by component (or with one skip); each check
        then reads its inputs as that answer leaves them: the value the answer sets (an
        update's ``value``), else the one the browser sent."""
        checks = list(self.checks)
        extra = [c for check in checks for c in check.inputs if not _among(c, inputs)]
        extra = list({id(c): c for c in extra}.values())
        added = [c for check in checks for c in check.outputs if not _among(c, outputs)]
        every = [*inputs, *extra]

        def run(*args: Any, **event: Any) -> Any:
            answer = handler(*args[: len(inputs)], **event)
            sets = answer if isinstance(answer, dict) and "__type__" not in answer else {}
            now = {
                id(c): _value_after(sets, c, value) for c, value in zip(every, args, strict=True)
            }
            results: dict[Any, Any] = {}
            for check in checks:
                result = check.fn(*(now[id(c)] for c in check.inputs))
                shown = (result,) if len(check.outputs) == 1 else tuple(result)
                results |= dict(zip(check.outputs, shown, strict=True))
            return {**sets, **results}

        run.__name__ = getattr(handler, "__name__", "commit")
        return run, every, [*outputs, *list({id(c): c for c in added}.values())]


def merged(*answers: dict[Key, Any]) -> dict[Key, Any]:
    """Answers keyed by component as one answer: a key that several set gets one update with
    every property they set, the later one's winning where two set the same (a plain value
    sets ``value``).

    >>> merged({"lr": gr.update(info="bad")}, {"lr": 0.1})["lr"] == gr.update(info="bad", value=0.1)
    True
    """
    answer: dict[Key, Any] = {}
    for each in answers:
        for key, value in each.items():
            if key in answer:
                value = gr.update(**(_properties(answer[key]) | _properties(value)))
            answer[key] = value
    return answer


def _properties(value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and value.get("__type__") == "update":
        return {name: v for name, v in value.items() if name != "__type__"}
    return {"value": value}


def _among(component: Any, components: list[Any]) -> bool:
    return any(component is other for other in components)


def _value_after(answer: dict[Any, Any], component: Any, sent: Any) -> Any:
    """The value ``component`` holds once ``answer`` is applied (``sent`` if it sets none)."""
    if component not in answer:
        return sent
    value = answer[component]
    if isinstance(value, dict) and value.get("__type__") == "update":
        return value.get("value", sent)
    return value
