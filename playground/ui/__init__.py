"""The Gradio page: the frame that joins the sections, and the controls read from the table."""

from playground.ui.page import build_demo, launch_kwargs, queue_kwargs

__all__ = ["build_demo", "launch_kwargs", "queue_kwargs"]
