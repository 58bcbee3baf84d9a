"""How the page is served: a public Space that shares nothing but this page, with bounds.

Rule: uploads are bounded to MAX_FILE_SIZE, kept sessions to SESSION_CAPACITY, queued runs to
one at a time per event, and heavy runs to one per visitor (``ui.fair_use``).
"""

from __future__ import annotations

from typing import Any

import gradio as gr
from starlette.middleware import Middleware

from playground.ui.assets import CSS, JS
from playground.ui.fair_use import HeavyRunMiddleware

# Uploads: the largest file the page needs (user data, at most 1 MB of CSV) with room to spare.
MAX_FILE_SIZE = "2mb"
# Sessions whose state Gradio keeps (oldest dropped first); each holds a copy of the page's
# outputs, about 0.2 MB, so this bounds that memory near 40 MB.
SESSION_CAPACITY = 200


def launch_kwargs(demo: gr.Blocks) -> dict[str, Any]:
    """Options for ``demo.launch``: a public Space that shares nothing but this page.

    Bounded: uploads to MAX_FILE_SIZE, kept sessions to SESSION_CAPACITY, and one heavy run per
    visitor (``ui.fair_use.HeavyRunMiddleware``, which reads each event's API name from the
    page's config, as Gradio serves it to clients).
    """
    api_names = {
        dependency["id"]: dependency.get("api_name")
        for dependency in demo.get_config_file()["dependencies"]
    }
    return {
        "share": False,
        "show_error": True,
        "max_threads": 8,
        "max_file_size": MAX_FILE_SIZE,
        "state_session_capacity": SESSION_CAPACITY,
        "footer_links": ["api", "gradio"],
        "theme": gr.themes.Soft(),
        "css": CSS,
        "js": JS,
        "app_kwargs": {"middleware": [Middleware(HeavyRunMiddleware, api_names=lambda: api_names)]},
    }


def queue_kwargs() -> dict[str, Any]:
    """One run at a time per event (the sweep and the training share one heavy lane).

    The queue's bound is generous because no visitor can hold more than one heavy place in it
    (``ui.fair_use``): it only stops a crowd, never one visitor's flood.
    """
    return {"max_size": 256, "default_concurrency_limit": 1}
