"""What the browser tracks at each loading-status change: little, and found first.

Gradio's front end keeps a loading status for every component an event ever tracked (its
progress targets and its inputs) and, at every status change of any event, finds each by a
depth-first walk of the layout tree and reads its data (a chart's whole figure, a container's
every child). The page keeps that work small: its States sit first in the tree (placed with
Gradio's public ``render``), and an event that shows no progress tracks it on a State, never on
a chart or a container.
"""

from __future__ import annotations

import gradio as gr
import pytest

from playground.ui.page import build_demo
from playground.ui.widgets import session_state, states_first

# Containers make the browser read every child's data; the rest hold heavy data of their own.
CONTAINERS = {"column", "row", "group", "tabs", "tabitem", "accordion"}
HEAVY = CONTAINERS | {"plot", "dataframe", "json", "code", "file"}


@pytest.fixture(scope="module")
def config():
    return build_demo().get_config_file()


def _tree_order(config) -> list[int]:
    order: list[int] = []

    def walk(node) -> None:
        order.append(node["id"])
        for child in node.get("children", ()):
            walk(child)

    walk(config["layout"])
    return order


def _kinds(config) -> dict[int, str]:
    return {component["id"]: component["type"] for component in config["components"]}


def test_every_state_comes_first_in_the_layout_tree(config):
    kinds = _kinds(config)
    order = _tree_order(config)[1:]  # below the root
    states = [i for i in order if kinds[i] == "state"]
    assert len(states) >= 10  # the page's, its sections' and the export's
    assert kinds[order[0]] == "column"  # the States' invisible home, then every State
    assert order[1 : 1 + len(states)] == states
    assert len(order) == len(set(order)) == len(kinds)  # nothing lost, nothing doubled


def test_states_first_places_states_made_inside_it_in_order_and_others_where_made():
    with gr.Blocks() as demo, states_first():
        title = gr.Markdown("title")
        with gr.Column():
            first = session_state(1)
            with gr.Row():
                second = session_state(2)
                button = gr.Button()
        button.click(lambda a, b: (b, a), [first, second], [first, second])
    outside = session_state(3)  # no page being built: an ordinary State, rendered nowhere here
    config = demo.get_config_file()
    order = _tree_order(config)
    assert order[2:4] == [first._id, second._id] and title._id in order
    assert outside._id not in order
    assert config["dependencies"][0]["inputs"] == [first._id, second._id]


def test_no_event_tracks_its_hidden_progress_on_a_chart_or_a_container(config):
    kinds = _kinds(config)
    quiet = [d for d in config["dependencies"] if d["show_progress"] == "hidden"]
    assert len(quiet) > 20
    for dependency in quiet:
        targets = dependency["show_progress_on"] or dependency["outputs"]
        heavy = [kinds[i] for i in targets if kinds[i] in HEAVY]
        assert heavy == [], (dependency["api_name"], dependency["backend_fn"], heavy)


def test_no_event_tracks_its_progress_on_a_container(config):
    kinds = _kinds(config)
    for dependency in config["dependencies"]:
        targets = dependency["show_progress_on"] or dependency["outputs"]
        assert not [i for i in targets if kinds[i] in CONTAINERS], dependency["backend_fn"]
