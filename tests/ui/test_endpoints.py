"""The page's handlers called directly, without a server: outputs, figures, errors, examples."""

from __future__ import annotations

import json
import math

import gradio as gr
import plotly.graph_objects as go
import pytest

from helpers import plotly_sent
from playground import StepConfig, run_report
from playground.core.formats.dtypes import dtype_facts
from playground.core.recipes.registry import recipe
from playground.core.settings.settings import defaults
from playground.ui.arguments import STEP
from playground.ui.endpoints import FIGURE_LABELS, run_step
from playground.ui.examples import EXAMPLES
from playground.ui.page import build_demo
from playground.ui.page_events import LOSS_SCALE_PRESETS
from playground.ui.wiring import preset_loss_scale

# The settings a positional call passes before the uploaded data file.
INPUT_ORDER = STEP.before_data

SMALL = StepConfig(n=32, d_in=8, d_out=4, lr=0.1, loss_scale=1024.0)
# run_step returns (headline Markdown, JSON summary, magnitude counters Markdown, *figures).
TEXT_OUTPUTS = 3
LARGEST = (4096, 1024, 1024)
# A scatter trace shows at most 2,000 points; a figure may hold two such traces (kernel and a
# bias of up to 1,024 entries, each subsampled the same way) plus a few hundred histogram and
# reference-line numbers. Counting x and y separately gives this ceiling whatever the shape.
MAX_POINTS_PER_TRACE = 2000
MAX_NUMBERS_PER_FIGURE = 2 * (2 * MAX_POINTS_PER_TRACE) + 400


@pytest.fixture(scope="module")
def small_outputs():
    return run_step(0, 32, 8, 4, 0.1, 1024.0)


def _figures(outputs) -> list[dict]:
    return [json.loads(plot.plot) for plot in outputs[TEXT_OUTPUTS:]]


def _numbers(values) -> int:
    """How many numbers (not labels) a trace's x or y holds, counting nested lists."""
    if isinstance(values, list):
        return sum(_numbers(v) for v in values)
    return 1 if isinstance(values, (int, float)) and not isinstance(values, bool) else 0


def test_step_returns_headline_summary_and_one_plot_per_slot(small_outputs):
    markdown, summary, counters, *plots = small_outputs
    report = run_report(SMALL)

    assert len(plots) == len(FIGURE_LABELS) >= 5  # one figure per gr.Plot on the page
    assert all(plotly_sent(plot) == json.loads(plot.plot) for plot in plots)
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss
    assert summary["losses"]["float32_new"] == report.float32_new_loss
    assert summary["config"] == SMALL.to_dict()
    # The headline shows the losses to 7 significant digits, the mixed new loss tagged by id.
    assert f"<span id='mixed-new-loss'>{report.mixed_new_loss:.7g}</span>" in markdown
    assert f"| float32 | {report.float32_initial_loss:.7g} " in markdown
    assert f"{report.float32_new_loss:.7g}" in markdown
    assert "bfloat16 compute" in markdown
    # The counters cover every gradient entry: 8 x 4 kernel + 4 bias.
    assert counters.startswith("Gradient entries in bfloat16 (36 in all)")


def test_a_kept_answer_is_the_same_steps_and_a_caller_cannot_change_it(small_outputs):
    """The second call with the same settings answers what a fresh report says, and changing the
    summary one caller got leaves the next caller's alone."""
    again = run_step(0, 32, 8, 4, 0.1, 1024.0)
    assert again.summary == small_outputs.summary and again.headline == small_outputs.headline
    assert [plot.plot for plot in again[TEXT_OUTPUTS:]] == [
        plot.plot for plot in small_outputs[TEXT_OUTPUTS:]
    ]
    again.summary["losses"]["mixed_new"] = "changed by a caller"
    third = run_step(0, 32, 8, 4, 0.1, 1024.0)
    assert third.summary["losses"]["mixed_new"] == run_report(SMALL).mixed_new_loss


def test_headline_follows_the_inputs():
    """A different learning rate and dtype give a different headline, matching run_report."""
    markdown, summary, counters, *_ = run_step(0, 32, 8, 4, 0.5, 1024.0, 0, 1.0, 1.0, "float16")
    report = run_report(SMALL.replace(lr=0.5, compute_dtype="float16"))
    assert summary["config"]["compute_dtype"] == "float16"
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss
    assert f"<span id='mixed-new-loss'>{report.mixed_new_loss:.7g}</span>" in markdown
    assert "float16 compute" in markdown and "bfloat16" not in markdown
    assert counters.startswith("Gradient entries in float16 (36 in all)")


def test_every_figure_is_valid_plotly(small_outputs):
    for figure in _figures(small_outputs):
        validated = go.Figure(figure)  # raises ValueError on any invalid property
        title = validated.layout.title.text
        assert title
        if title.startswith("Activation gradients"):
            # The linear model has no hidden activation: the chart says so instead of plotting.
            assert not validated.data and "choose mlp" in title
        else:
            assert len(validated.data) >= 1


def test_figures_stay_small_at_the_largest_shape():
    n, d_in, d_out = LARGEST
    outputs = run_step(0, n, d_in, d_out, 0.1, 1024.0)
    assert outputs[1]["config"]["n"] == n
    figures = _figures(outputs)
    assert len(figures) == len(FIGURE_LABELS)
    total_chars = sum(len(plot.plot) for plot in outputs[TEXT_OUTPUTS:])
    for figure in figures:
        go.Figure(figure)
        per_figure = 0
        for trace in figure["data"]:
            for axis in ("x", "y"):
                count = _numbers(trace.get(axis, []))
                assert count <= MAX_POINTS_PER_TRACE, (trace.get("name"), axis, count)
                per_figure += count
        assert per_figure <= MAX_NUMBERS_PER_FIGURE, (figure["layout"]["title"], per_figure)
    # 4M kernel entries would be ~80 MB of JSON; the page gets a few hundred kB at most.
    assert total_chars < 400_000


BAD_INPUTS = [
    ("n", 0, "n (batch rows N) must be an integer in [1, 4096]"),
    ("n", 4097, "n (batch rows N) must be an integer in [1, 4096]"),
    ("n", "abc", "n (batch rows N) must be an integer in [1, 4096]"),
    ("lr", -1, "lr (learning rate) must be a finite number in [0, "),
    ("lr", math.nan, "lr (learning rate) must be a finite number in [0, "),
    ("loss_scale", 0, "loss_scale (loss scale) must be a finite number in [2^-126, 2^126]"),
    ("loss_scale", math.inf, "loss_scale (loss scale) must be a finite number in [2^-126, 2^126]"),
    ("model_seed", -1, "model_seed (model seed) must be an integer in [0, 4294967295]"),
    ("model_seed", 1.5, "model_seed (model seed) must be an integer in [0, 4294967295]"),
    ("compute_dtype", "float64", "compute_dtype (compute dtype) must be one of bfloat16, float16"),
]


@pytest.mark.parametrize(("field", "value", "message"), BAD_INPUTS, ids=lambda v: repr(v))
def test_invalid_input_raises_gr_error_naming_the_field(field, value, message):
    args = {**defaults(), "n": 32, "d_in": 8, "d_out": 4, field: value}
    with pytest.raises(gr.Error) as caught:
        run_step(*(args[name] for name in INPUT_ORDER))
    text = caught.value.message
    assert text.startswith(field + " ("), text
    assert text.startswith(message), text
    assert text.endswith(f"got {value!r}"), text


@pytest.mark.parametrize("value", [None, ""])
def test_a_cleared_field_is_named_as_empty_with_its_range(value):
    args = {**defaults(), "n": 32, "d_in": 8, "d_out": 4, "lr": value}
    with pytest.raises(gr.Error) as caught:
        run_step(*(args[name] for name in INPUT_ORDER))
    assert caught.value.message.startswith("lr (learning rate) is empty: enter a finite number")


def test_build_demo_wires_the_step_endpoint_to_every_output():
    demo = build_demo()
    config = demo.config if isinstance(demo.config, dict) else demo.get_config_file()
    endpoints = {dep.get("api_name"): dep for dep in config["dependencies"]}
    assert "step" in endpoints and "ping" in endpoints
    step = endpoints["step"]
    # Ten settings, the model's five, the uploaded data file, then float8's two, precision
    # per operation's three, block scaling's three and the optimizer state's and
    # accumulation's three, the transformer's two (added after the file, so older positional
    # calls keep working).
    assert len(step["inputs"]) == len(INPUT_ORDER) + 1 + 2 + 3 + 3 + 3 + 2 == 29
    assert len(set(step["inputs"])) == 29  # 29 distinct components
    # Gradio drops surplus return values with only a warning, so the counts must match.
    assert len(step["outputs"]) == len(run_step(0, 4, 2, 1, 0.1, 1.0))
    assert len(step["outputs"]) == TEXT_OUTPUTS + len(FIGURE_LABELS)
    assert step["trigger_mode"] == "always_last"
    presets = [name for name in endpoints if name and name.startswith("preset_")]
    assert "preset_loss_scale" in presets
    assert all(endpoints[name]["api_visibility"] == "private" for name in presets), presets
    assert config["title"] == "Mixed-Precision Step Playground"


@pytest.mark.parametrize(
    ("api_name", "box", "results"),
    [
        ("sweep", "sweep-progress", "sweep-results"),
        ("dynamics", "dynamics-progress", "dynamics-results"),
    ],
)
def test_heavy_runs_show_progress_and_refusals_beside_their_results(api_name, box, results):
    """A sweep's or a training run's progress and refusal go to their own box, outside the
    column of the results they would otherwise cover (so a refused run leaves them shown)."""
    config = build_demo().get_config_file()
    by_id = {c["id"]: c for c in config["components"]}
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    dependency = next(d for d in config["dependencies"] if d.get("api_name") == api_name)
    assert [elem[i] for i in dependency["show_progress_on"]] == [box]
    parents: dict[int, int] = {}

    def walk(node: dict, parent: int | None) -> None:
        if parent is not None:
            parents[node["id"]] = parent
        for child in node.get("children", []):
            walk(child, node["id"])

    walk(config["layout"], None)
    chain, at = [], dependency["show_progress_on"][0]
    while at in parents:
        at = parents[at]
        chain.append(elem.get(at))
    assert results not in chain and by_id[dependency["show_progress_on"][0]]["type"] == "markdown"


def test_loss_scale_presets_are_powers_of_two():
    assert len(LOSS_SCALE_PRESETS) >= 3
    for label in LOSS_SCALE_PRESETS:
        value = preset_loss_scale(label)
        mantissa, exponent = math.frexp(value)
        assert mantissa == 0.5, (label, value)  # exactly 2**(exponent - 1)
        assert label.startswith("2^")
        assert value == 2.0 ** int(label.split()[0][2:]), (label, value)


def _example_report(keyword: str):
    (overrides,) = [o for label, o in EXAMPLES if keyword in label]
    return run_report(StepConfig(**(defaults() | overrides)))


def test_every_example_is_a_valid_config():
    assert len(EXAMPLES) >= 4
    for label, overrides in EXAMPLES:
        config = StepConfig(**(defaults() | overrides))
        assert set(overrides) <= set(STEP.order), label  # late inputs (norm, ...) included
        assert config.to_dict() == defaults() | overrides, label


def test_flush_example_loses_gradients_to_underflow():
    report = _example_report("flush")
    assert report.config.compute_dtype == "float16"
    assert sum(p.underflow_count for p in report.params.values()) > 0


def test_come_back_example_recovers_them_with_a_loss_scale():
    report = _example_report("come back")
    flushed = _example_report("flush")
    assert report.config.loss_scale > 1
    assert report.config.input_scale == flushed.config.input_scale  # the same data
    underflow = {name: p.underflow_count for name, p in report.params.items()}
    assert sum(underflow.values()) == 0, f"still flushed to zero with the loss scale: {underflow}"
    assert all(p.nonfinite_scaled_count == 0 for p in report.params.values())


def _scale_past_largest(overrides: dict) -> bool:
    """Whether a lesson's loss scale lies past the largest value of its gradient format, in a
    recipe that casts the scaled gradient as it is (a scaled recipe rescales it first)."""
    config = StepConfig(**(defaults() | overrides))
    chosen = recipe(config.compute_dtype)
    plain = chosen.dot_general is None
    return plain and config.loss_scale > dtype_facts(chosen.gradient_format).max


def test_overflow_example_overflows_the_scaled_gradients():
    # The lesson is picked by its settings (a loss scale its format cannot hold), not by its
    # label: other lessons' labels speak of overflows too.
    (overrides,) = [o for _, o in EXAMPLES if _scale_past_largest(o)]
    report = run_report(StepConfig(**(defaults() | overrides)))
    assert sum(p.nonfinite_scaled_count for p in report.params.values()) > 0
