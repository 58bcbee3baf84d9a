"""What the browser tracks at each loading-status change: little, and found first.

Gradio's front end keeps a loading status for every component an event ever tracked (its
progress targets and its inputs) and, at every status change of any event, finds each by a
depth-first walk of the layout tree and reads its data (a chart's whole figure, a container's
every child). The page keeps that work small: an event that shows no progress tracks it on a
State, never on a chart or a container.
"""

from __future__ import annotations

import pytest

from playground.ui.page import build_demo

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
