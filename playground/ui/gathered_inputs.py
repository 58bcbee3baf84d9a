"""A commit's many inputs gathered in the browser and sent as one value.

Rule: an event that reads every control is wired as two events. The first runs in the browser
only (``js``, no server call): it puts the values of the controls, in order, into one hidden
``gr.JSON`` box. The second, chained after it (``.then``), is the server's: its inputs are the
box and the States, and it calls the handler with every input in the original order, each
control's value as the browser held it at the commit (raw, as an event with
``preprocess=False`` receives it). The box also holds the page's number for the gathering
(``SENT``: 1, 2, ... in the order the page sent them), read where the event joins the queue
(``sent_number``): the server starts a session's commits in that order (``ui.session_order``).
A handler with a parameter annotated ``gr.EventData`` (one chain for several triggers:
``gr.on``) gets the server event's own, by that name: Gradio's front end passes the trigger's
id along a chain, so its ``target`` is the component clicked. A box whose list does not match
the controls is refused, naming the box, before the handler runs. The checks that go by
component (whose upload a file is, ``ui.public``; a request's work and a commit's order,
``ui.launch``) read the controls inside the box (``expanded``), so a gathered commit is
checked as one that sent them.

Why: Gradio's front end (6.31) puts the inputs of an event the server answered into its table
of loading statuses and, at every status change of any later event, finds each entry by a walk
of the page's layout tree and sets it again; an event that runs in the browser only never
enters that table. A commit reads about 40 components, so every later commit would pay for
40 entries at each of its status changes; gathered, it pays for the box and the States
(``bench/bench_browser.py`` times a commit both ways).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gradio as gr

from playground.core.settings.settings import ConfigError

# The key of the box's number: the page's count of its gatherings, in the order it made them.
SENT = "sent"
# The browser-side half: the controls' values, in the order of the event's inputs, and the
# page's number for this gathering (a counter on the page's window, one per tab).
GATHER_JS = (
    "(...values) => ({values, "
    f"{SENT}: (globalThis.playgroundSent = (globalThis.playgroundSent || 0) + 1)}})"
)
BOX_ID = "gathered-inputs"


def event_parameter(handler: Callable[..., Any]) -> str | None:
    """The name of ``handler``'s parameter annotated ``gr.EventData`` (or a subclass), as Gradio
    finds it; None when it has none."""
    try:
        hints = typing.get_type_hints(handler)
    except (NameError, TypeError):
        hints = getattr(handler, "__annotations__", {})
    for name in inspect.signature(handler).parameters:
        hint = hints.get(name)
        if inspect.isclass(hint) and issubclass(hint, gr.EventData):
            return name
    return None


def box() -> gr.JSON:
    """The hidden box the browser gathers into (one per page, made where the layout is)."""
    return gr.JSON(visible=False, elem_id=BOX_ID)


@dataclass(frozen=True)
class Gathered:
    """An event's ``(handler, inputs, outputs)`` rewired through ``box`` (see the rule);
    ``event``: the name of the handler's parameter that takes the event's ``gr.EventData``
    (``event_parameter``), None when it takes none."""

    box: gr.JSON
    handler: Callable[..., Any]
    inputs: list[Any]
    outputs: list[Any]
    event: str | None = None

    @property
    def sent(self) -> list[Any]:
        """The inputs the browser gathers: every one but the States (held by the server)."""
        return [c for c in self.inputs if not isinstance(c, gr.State)]

    @property
    def kept(self) -> list[gr.State]:
        return [c for c in self.inputs if isinstance(c, gr.State)]

    def values(self, gathered: Any, *states: Any) -> list[Any]:
        """Every input's value in order: the controls' from the box, the States' as the server
        holds them; ConfigError when the box does not hold one value per control."""
        sent = self.sent
        values = gathered.get("values") if isinstance(gathered, dict) else None
        if not isinstance(values, list) or len(values) != len(sent):
            # Described, never echoed: a payload of any depth or size is named in a few words.
            got = (
                f"{len(values)} value{'' if len(values) == 1 else 's'}"
                if isinstance(values, list)
                else "null"
                if gathered is None
                else f"a {type(gathered).__name__} without a list of values"
            )
            raise ConfigError(
                BOX_ID,
                f"{BOX_ID} takes the page's {len(sent)} control values in one list "
                f"({{'values': [...]}}), in the order of the page's controls; got {got}",
            )
        by_id = dict(zip(map(id, sent), values, strict=True))
        by_id |= dict(zip(map(id, self.kept), states, strict=False))
        return [by_id.get(id(c)) for c in self.inputs]

    def server_handler(self, gathered: Any, *states: Any, event: Any = None) -> Any:
        """The handler, called with every input in order (``values``) and, when it takes one
        (``self.event``), the event's ``gr.EventData``."""
        try:
            values = self.values(gathered, *states)
        except ConfigError as error:
            raise gr.Error(str(error)) from None
        if self.event is None:
            return self.handler(*values)
        return self.handler(*values, **{self.event: event})

    def after(self, start: Callable[..., Any], **options: Any) -> Any:
        """Wire the two events: ``start(fn, inputs, outputs, **kw)`` makes the browser's (a
        trigger's listener, ``gr.on`` on triggers, or an event's ``.then``); the server's
        follows it with ``options``. Returns the server's event."""
        gather = start(None, self.sent, self.box, js=GATHER_JS, api_visibility="private")

        def handler(gathered: Any, *states: Any) -> Any:
            return self.server_handler(gathered, *states)

        # Gradio fills a parameter by its annotation only before ``*states``: first, here.
        def by_trigger(event: gr.EventData, gathered: Any, *states: Any) -> Any:
            return self.server_handler(gathered, *states, event=event)

        server = handler if self.event is None else by_trigger
        server.__name__ = getattr(self.handler, "__name__", "handler")
        server.gathered = self  # type: ignore[attr-defined]  # read by ``expanded``
        return gather.then(server, [self.box, *self.kept], self.outputs, **options)


def expanded(fn: Any, inputs: list[Any]) -> tuple[list[Any], list[Any]]:
    """An event's input components and raw values as its handler reads them: for a server
    event that reads a box (see the rule), every control and State with its value, so the
    checks that go by component (a file's owner, a request's work) see each control; else
    ``fn.inputs`` and ``inputs``. ConfigError when a box is malformed."""
    gathered = _gathered(fn)
    if gathered is None:
        return list(getattr(fn, "inputs", ())), list(inputs)
    return list(gathered.inputs), gathered.values(*inputs)


def sent_number(fn: Any, inputs: list[Any]) -> int | None:
    """The page's number in the box an event's join sent (``inputs``, raw); None when ``fn``
    reads no box or the box holds no positive whole number under ``SENT``.

    >>> event = type("Event", (), {"fn": staticmethod(lambda: None)})()
    >>> sent_number(event, [{"values": [], "sent": 3}]) is None  # no box: not gathered
    True
    """
    if _gathered(fn) is None or not inputs or not isinstance(inputs[0], dict):
        return None
    number = inputs[0].get(SENT)
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        return None
    return number


def components(fn: Any) -> list[Any]:
    """The components an event's handler reads (``expanded``'s, without the values)."""
    gathered = _gathered(fn)
    return list(gathered.inputs) if gathered is not None else list(getattr(fn, "inputs", ()))


def is_gathered(fn: Any) -> bool:
    """Whether ``fn`` (a registered event) is a server event that reads a box."""
    return _gathered(fn) is not None


def _gathered(fn: Any) -> Gathered | None:
    """The record ``Gathered.after`` left on a registered event's handler, if any."""
    return getattr(getattr(fn, "fn", None), "gathered", None)
