"""The smallest Gradio page with what bench_browser.py times: the floor it is compared with.

A number (``#lr``) whose Enter answers a one-row Markdown table in ``#headline`` holding
``#mixed-new-loss``, and one gr.Plot (a three-bar Plotly figure) drawn on page load: Gradio's
and Plotly's own costs, with none of the playground's. Served on GRADIO_SERVER_PORT.

Usage: ``python bench/baseline_page.py`` (bench_browser.py launches it itself).
"""

from __future__ import annotations

import gradio as gr
import plotly.graph_objects as go


def headline(lr: float) -> str:
    """The table the playground's headline test reads, with ``lr`` as its value."""
    return f"| mixed new loss |\n|---|\n| <span id='mixed-new-loss'>{lr}</span> |"


def figure() -> go.Figure:
    """Three bars."""
    return go.Figure(go.Bar(x=[1, 2, 3], y=[3, 1, 2]))


def build() -> gr.Blocks:
    with gr.Blocks(title="baseline") as demo:
        lr = gr.Number(0.1, elem_id="lr")
        table = gr.Markdown(headline(0.1), elem_id="headline")
        plot = gr.Plot(show_label=False)
        lr.submit(headline, lr, table, show_progress="minimal")
        demo.load(figure, None, plot)
    return demo


if __name__ == "__main__":
    build().launch()
