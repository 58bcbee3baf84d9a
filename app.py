"""Entry point for `python app.py` and for Hugging Face Spaces.

Serves on 127.0.0.1:7860 unless GRADIO_SERVER_NAME / GRADIO_SERVER_PORT say otherwise
(Spaces sets them).
"""

from playground.ui.launch import launch_kwargs, queue_kwargs
from playground.ui.page import build_demo

demo = build_demo()

if __name__ == "__main__":
    demo.queue(**queue_kwargs()).launch(**launch_kwargs(demo))
