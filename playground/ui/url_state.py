"""URL state: the page's settings live in its query string, and nowhere on the server.

Rules:
  keys      the settings' field names (``?lr=0.05&loss_scale=8&compute_dtype=float16&n=64``).
  reading   on page load the server reads the query (``gr.Request.query_params``) and checks each
            known key with the core's ``check_setting``, the text read as an int for an integer
            field, a float for the other numbers, as is for a choice. Unknown keys are ignored. A
            valid value is set in its control; an invalid one leaves the control at its default
            and is named, with the core's message, in a notice (``#url-notice``) and a warning.
  too long  a page address whose query is over MAX_QUERY characters (no setting needs a
            thousand) is answered with a redirect to the page with only ``link_too_long=<its
            length>`` (``LongLinkRedirect``): the page's own requests carry the query, and one
            of 65,000 characters was refused (400) so the page stayed empty without a word.
            The page then says so in the notice and a warning, and uses the defaults. So that
            such an address reaches the page at all, the server reads request heads up to
            MAX_HEAD bytes (uvicorn's h11 default of 16 KB refused some 65,000-character
            links with a bare 400, depending on how the bytes arrived).
  order     the URL is read on page load, and the page's first step is chained after it
            (``.then`` on the event ``wire_url_state`` returns), so the page's first numbers
            are the URL's settings.
  writing   after the URL is read and on every committed change of a setting (the events the
            page passes as ``written``: the results' settings changing, a training setting
            committed; never a keystroke or an invalid value), the browser
            rewrites the query with ``history.replaceState`` (no new history entry): one key per
            setting that differs from its default, in the table's order; keys that are not
            settings (``__theme``, ...) are kept. A link names only what it changes.
  copying   the "copy link" button copies the page's address (``navigator.clipboard``) and shows
            it in a textbox, which says whether the clipboard took it (the fallback where the
            clipboard is unavailable or refused). In an iframe (a Hugging Face Space) this is the
            iframe's own address, which opens the app directly.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from typing import Any

import gradio as gr
from starlette.middleware import Middleware
from uvicorn.protocols.http import h11_impl

from playground.core.settings.settings import ConfigError, StepConfig, check_setting, settings
from playground.ui.widgets import DEFAULTS, quiet_progress, session_state

NOTICE_ID = "url-notice"
# The longest query a link may carry (a link with every setting changed is under 1,000).
MAX_QUERY = 8192
TOO_LONG = "link_too_long"
MAX_HEAD = 2**17
COPY_ID = "copy-link"
LINK_ID = "link-text"
# Writes wait for a pause this long (ms): a dragged slider changes many times a second, and
# Chrome ignores history writes past about 200 in 10 s.
WRITE_DELAY_MS = 150

COPY_JS = """async () => {
    const url = window.location.href;
    let label = "Link copied to the clipboard";
    try {
        await navigator.clipboard.writeText(url);
    } catch (error) {
        label = "The clipboard is unavailable: copy this link";
    }
    return {__type__: "update", value: url, label: label, visible: true};
}"""


def parse(name: str, text: str) -> Any:
    """A query value as its field reads it; text that is no number stays text, which
    ``check_setting`` then refuses with the core's message."""
    bounds = settings()[name]
    if bounds.choices:
        return text
    for kind in (int, float) if bounds.integer else (float,):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_query(query: dict[str, str], fields: list[str]) -> tuple[dict[str, Any], list[str]]:
    """The valid settings among ``fields`` in ``query``, and the core's message for each invalid
    one (field order)."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for name in fields:
        if name in query:
            try:
                values[name] = check_setting(name, parse(name, query[name]))
            except ConfigError as error:
                problems.append(str(error))
    while values:  # a rule across fields (none yet) drops the field it names
        try:
            StepConfig(**(DEFAULTS | values))
            break
        except ConfigError as error:
            problems.append(str(error))
            if values.pop(error.field, None) is None:
                values.clear()
    return values, problems


def too_long_message(length: str) -> str:
    """The problem of a link whose query was cut (``length``: its characters, as sent)."""
    shown = f"{int(length):,} characters" if length.isdigit() else "too long"
    return (
        f"the link's query was {shown}, more than the {MAX_QUERY:,} a link may carry, so none "
        "of its settings were read"
    )


class LongLinkRedirect:
    """ASGI middleware: a GET of the page with a query over MAX_QUERY characters is sent to the
    same page with only ``link_too_long=<length>`` (see the module's rule)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        query = scope.get("query_string", b"") if scope["type"] == "http" else b""
        if scope.get("method") == "GET" and scope.get("path") == "/" and len(query) > MAX_QUERY:
            location = f"?{TOO_LONG}={len(query)}".encode()
            headers = [(b"location", location), (b"content-length", b"0")]
            await send({"type": "http.response.start", "status": 303, "headers": headers})
            await send({"type": "http.response.body", "body": b""})
            return
        await self.app(scope, receive, send)


def long_link_middleware() -> Middleware:
    """``LongLinkRedirect`` for ``launch``'s ``app_kwargs``; call before the launch: it also
    raises the size of a request head the server reads to MAX_HEAD (see the module's rule).

    Gradio builds uvicorn's Config itself and passes no ``h11_max_incomplete_event_size``, so
    the default that uvicorn's h11 protocol reads for each new connection is raised instead.
    """
    h11_impl.DEFAULT_MAX_INCOMPLETE_EVENT_SIZE = max(
        h11_impl.DEFAULT_MAX_INCOMPLETE_EVENT_SIZE, MAX_HEAD
    )
    return Middleware(LongLinkRedirect)


def as_text(message: str) -> str:
    """A message for Markdown or a toast (both render HTML) that shows exactly as written: a
    value from a crafted URL adds no tag, link or emphasis."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|~])", r"\\\1", html.escape(message, quote=False))


def notice_text(problems: list[str]) -> str:
    """The Markdown notice naming the URL's invalid settings, one core message each."""
    items = "".join(f"\n- {as_text(problem)}" for problem in problems)
    return f"**Ignored in the URL** (the defaults are used):\n{items}"


def _write_js(fields: list[str]) -> str:
    """JS given every setting's value: rewrite the query, and hide a shown link (now stale)."""
    return f"""(...values) => {{
    const fields = {json.dumps(fields)};
    const defaults = {json.dumps({name: DEFAULTS[name] for name in fields})};
    clearTimeout(window.playgroundUrlWrite);
    window.playgroundUrlWrite = setTimeout(() => {{
        const query = new URLSearchParams(window.location.search);
        query.delete({json.dumps(TOO_LONG)});  // said once, in the notice
        fields.forEach((name, i) => {{
            query.delete(name);
            const value = values[i];
            if (value !== null && value !== undefined && value !== defaults[name]) {{
                query.set(name, String(value));
            }}
        }});
        const text = query.toString();
        const url = window.location.pathname + (text ? "?" + text : "") + window.location.hash;
        if (url !== window.location.pathname + window.location.search + window.location.hash) {{
            const before = window.location.href.split("#")[0];
            window.history.replaceState(window.history.state, "", url);
            const after = window.location.href.split("#")[0];
            // Plotly (under Gradio's <base href>) writes clip-paths as url('<page address>#id')
            // with the address when the chart was first drawn; after the rewrite those point
            // at another document and bars spill out of their axes. Repoint them and the base
            // each chart uses for its next update.
            document.querySelectorAll(".js-plotly-plot").forEach((chart) => {{
                if (chart._context && chart._context._baseUrl) chart._context._baseUrl = after;
            }});
            document.querySelectorAll("[clip-path]").forEach((element) => {{
                const clip = element.getAttribute("clip-path");
                if (clip && clip.includes(before)) {{
                    element.setAttribute("clip-path", clip.split(before).join(after));
                }}
            }});
        }}
    }}, {WRITE_DELAY_MS});
    return {{__type__: "update", visible: false}};
}}"""


@dataclass
class UrlRow:
    """The URL's components: the notice naming ignored settings, the copy button, the link, and
    the State the URL's read tracks its progress on."""

    notice: gr.Markdown
    copy: gr.Button
    link: gr.Textbox
    progress: gr.State  # where the URL's read tracks its progress (ui.widgets.quiet_progress)


def build_url_row() -> UrlRow:
    """The URL notice and the copy-link button, where the page shows them."""
    notice = gr.Markdown(elem_id=NOTICE_ID, visible=False)
    with gr.Row(equal_height=True):
        copy = gr.Button("Copy link to these settings", elem_id=COPY_ID, size="sm", scale=0)
        link = gr.Textbox(label="link", elem_id=LINK_ID, visible=False, interactive=True, scale=1)
    return UrlRow(notice, copy, link, session_state(None))


def wire_url_state(
    demo: gr.Blocks, row: UrlRow, controls: dict[str, Any], written: list[Any] | None = None
) -> Any:
    """Keep the settings among ``controls`` (name -> component; other names are skipped) in the
    URL both ways; returns the page-load event that reads the URL, for the page to chain its
    first step after (see the module's rule)."""
    fields = [name for name in settings() if name in controls]
    components = [controls[name] for name in fields]

    def read_url_state(request: gr.Request) -> list[Any]:
        query = dict(request.query_params) if request is not None else {}
        values, problems = read_query(query, fields)
        if TOO_LONG in query:
            problems.insert(0, too_long_message(query[TOO_LONG]))
        if problems:
            message = "Ignored in the URL (the defaults are used): " + ". ".join(problems)
            gr.Warning(html.escape(message, quote=False), duration=None)
        updates = [
            gr.update(value=values.get(name, DEFAULTS[name])) if name in query else gr.update()
            for name in fields
        ]
        return [*updates, gr.update(value=notice_text(problems), visible=bool(problems))]

    read = demo.load(
        read_url_state,
        outputs=[*components, row.notice],
        api_visibility="private",
        **quiet_progress(row.progress),
    )
    write = {"fn": None, "inputs": components, "outputs": row.link, "js": _write_js(fields)}
    read.success(**write, show_progress="hidden")
    triggers = written if written is not None else [c.change for c in components]
    gr.on(triggers, **write, show_progress="hidden")
    row.copy.click(fn=None, outputs=row.link, js=COPY_JS, show_progress="hidden")
    return read
