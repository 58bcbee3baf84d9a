"""The README's promises (Space front matter, the three set-up commands, CI running the full
suite's, its examples) and what the documentation pages (docs/*.md) state, checked against the
code: each statement is read from the page that makes it."""

import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"


def page(name: str) -> str:
    """The text of the documentation page docs/<name>.md."""
    return (DOCS / f"{name}.md").read_text()


# The pages that show the Python examples: the README and the docs' calling page.
EXAMPLE_PAGES = ("README.md", "docs/calling.md")


def front_matter() -> dict:
    match = re.match(r"^---\n(.*?)\n---\n", README, re.DOTALL)
    assert match, "README.md must start with Hugging Face Space front matter"
    return yaml.safe_load(match.group(1))


def pins(path: str) -> dict[str, str]:
    lines = (ROOT / path).read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))


def bash_blocks() -> list[str]:
    return re.findall(r"```bash\n(.*?)\n```", README, re.DOTALL)


def test_front_matter_describes_a_gradio_space_matching_the_pins():
    meta = front_matter()
    assert meta["sdk"] == "gradio"
    assert meta["sdk_version"] == pins("requirements.txt")["gradio"]
    assert (ROOT / meta["app_file"]).is_file()
    major, minor = (int(part) for part in str(meta["python_version"]).split("."))
    assert (major, minor) >= (3, 11)  # jax and flax need Python 3.11+
    assert len(meta["short_description"]) <= 60
    for key in ("title", "emoji", "colorFrom", "colorTo", "license"):
        assert meta[key]


def test_three_commands_run_the_app_the_quick_tests_and_the_full_suite_ci_runs():
    run_app, quick_tests, full_suite = bash_blocks()[:3]
    assert run_app == "pip install -r requirements.txt && python app.py"
    assert quick_tests == "pip install -r requirements-dev.txt && python -m pytest"
    assert full_suite == "pip install -r requirements-dev.txt && python -m pytest --full"
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert full_suite in ci, ".ci/run must run the README's full-suite command verbatim"
    assert quick_tests not in ci, "CI runs the full suite, not the quick tier"


README_MAX_LINES = 200
# [text](target) and ![alt](target): the target up to a space or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s[^)]*)?\)")


def relative_links(text: str) -> list[str]:
    """The link targets in ``text`` that point into the repository (not a URL, not an anchor of
    the same page), without their anchors."""
    targets = (match.group(1) for match in LINK.finditer(text))
    return [
        target.split("#", 1)[0]
        for target in targets
        if not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")
    ]


def test_relative_links_leave_out_urls_and_anchors():
    text = "[a](docs/a.md#x) ![b](docs/b.png) [c](https://example.com/) [d](#top) [e](mailto:x)"
    assert relative_links(text) == ["docs/a.md", "docs/b.png"]


def test_the_readme_is_short_and_its_relative_links_lead_to_files():
    """A front page of at most 200 lines; the rest is on the documentation site (docs/), which
    tests/test_docs.py builds."""
    assert len(README.splitlines()) <= README_MAX_LINES
    links = relative_links(README)
    assert {"docs/screenshot.png", "docs/deploy.md", "docs/testing.md"} <= set(links)
    missing = [target for target in links if not (ROOT / target).is_file()]
    assert not missing, f"README links to files that do not exist: {missing}"


def test_dev_requirements_include_the_runtime_pins():
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()
    assert {"jax", "flax", "optax", "gradio", "plotly", "numpy"} <= set(pins("requirements.txt"))


@pytest.mark.parametrize("where", EXAMPLE_PAGES)
def test_the_client_example_works_as_written(where, app_url, capsys):
    from playground import StepConfig, run_report

    blocks = re.findall(r"```python\n(.*?)\n```", (ROOT / where).read_text(), re.DOTALL)
    example = next(block for block in blocks if "gradio_client" in block)
    assert 'Client("http://127.0.0.1:7860/")' in example
    exec(example.replace("http://127.0.0.1:7860/", app_url), {})
    # The client first announces itself ("Loaded as API: ..."); the example's prints come last.
    printed = " ".join(capsys.readouterr().out.splitlines()[-2:]).split()
    report = run_report(StepConfig(n=32, d_in=8, d_out=4, lr=0.1, loss_scale=1024.0))
    assert float(printed[0]) == report.mixed_new_loss
    assert float(printed[1]) == report.float32_new_loss
    assert int(printed[2]) == report.kernel.underflow_count


@pytest.mark.parametrize("where", EXAMPLE_PAGES)
def test_the_package_example_runs(where):
    blocks = re.findall(r"```python\n(.*?)\n```", (ROOT / where).read_text(), re.DOTALL)
    example = next(block for block in blocks if "mixed_precision_step(0, x, y" in block)
    namespace: dict = {}
    exec(example, namespace)
    assert namespace["report"].config.n == 32


def test_lessons_page_precision_claims_hold_on_this_backend():
    """Each sentence about precision in 'What you can learn' is computed here, independently."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from playground import StepConfig, run_report
    from playground.core.settings.settings import settings

    lessons = _flat(page("lessons"))
    # float16: a value at or below 2^-25 (about 2.98e-8) rounds to zero, one just above does not.
    assert "2^-25 (about 2.98e-8" in lessons
    assert float("2.98e-8") == np.float64(2.0**-25).round(10)
    assert np.float16(2.0**-25) == 0 and np.float16(np.nextafter(2.0**-25, 1.0)) > 0
    # Tiny data at S = 1 loses most entries; 2^15 brings them back; 2^16 gives inf and NaN.
    tiny = StepConfig(
        compute_dtype="float16", input_scale=2.0**-12, target_scale=2.0**-12, loss_scale=1.0
    )
    assert "Scale the loss by 2^15 and they come back" in lessons
    lost = sum(p.underflow_count for p in run_report(tiny).params.values())
    assert lost > 0.5 * sum(p.size for p in run_report(tiny).params.values())
    assert (
        sum(p.underflow_count for p in run_report(tiny.replace(loss_scale=2.0**15)).params.values())
        == 0
    )
    scaled = np.concatenate(
        [
            p.scaled_grads.ravel()
            for p in run_report(tiny.replace(loss_scale=2.0**16)).params.values()
        ]
    )
    # NaN, no inf (the default batch's counts: tests/core/lessons/test_lessons.py).
    assert "come out as NaN" in lessons and np.isnan(scaled).all()

    # float16 subnormals survive a compiled product here; float32 and bfloat16 ones do not.
    def product(dtype):
        tiny_value = jnp.asarray(jnp.finfo(dtype).smallest_subnormal, dtype)
        return float(jax.jit(lambda a, b: a * b)(tiny_value, jnp.ones((), dtype)))

    if jax.default_backend() == "cpu":
        assert product(jnp.float16) > 0 and product(jnp.float32) == 0 == product(jnp.bfloat16)
    # The loss scale's range is [2^-126, 2^126].
    bounds = settings()["loss_scale"]
    assert "[2^-126, 2^126]" in lessons and (bounds.low, bounds.high) == (2.0**-126, 2.0**126)


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_lessons_page_training_story_numbers_are_the_float16_lessons_run():
    """The loss-scaling story's batch, float32's fit and float16's stall at S = 1, and the
    meter's split, recomputed here from the lesson's own run (its arrays, not its sentence).
    Float32's floor and float16's stall are losses that stopped moving: the lessons page states
    them, and the ratio, to 2 significant digits after "about", which must hold across the
    spread XLA's CPU variations give them (``stated_figures``); the start to 4 digits."""
    import numpy as np
    from stated_figures import (
        FIGURE,
        NOISE_SPREAD,
        ROUNDING_SPREAD,
        significant_digits,
        states,
        stopped,
    )

    from playground.core.lessons import DYNAMICS_LESSONS
    from playground.core.lessons import lesson as lesson_by_id

    text = _flat(page("lessons"))
    assert "Eight training lessons" in text and len(DYNAMICS_LESSONS) == 8
    lesson = lesson_by_id("train-float16-unscaled")
    config = lesson.config()
    assert (config.compute_dtype, config.loss_scale, config.mode) == ("float16", 1.0, "static")
    assert (config.n, config.d_in, config.d_out, config.lr) == (4096, 8, 16, 2.0)
    assert config.target_scale == 2.0**-16 and config.input_scale == 1.0
    assert "(4096 rows, 8 inputs, 16 outputs, targets of size 2^-16, lr 2)" in text
    run = lesson.run()
    float32, mixed = np.asarray(run.float32_loss), np.asarray(run.mixed_loss)
    said = re.search(
        rf"in (\d+) steps float32 goes ({FIGURE}) -> about ({FIGURE}), its noise floor\. .*"
        rf"float16 at S = 1 stalls at about ({FIGURE}), about ({FIGURE}) x float32's final loss",
        text,
    )
    assert said, "the lessons page's loss-scaling story"
    steps, start, floor, stall, ratio = said.groups()
    assert int(steps) == config.steps and stopped(float32) and stopped(mixed)
    assert significant_digits(start) == 4 and states(start, float32[0], ROUNDING_SPREAD)
    for figure, value in (
        (floor, float32[-1]),
        (stall, mixed[-1]),
        (ratio, mixed[-1] / float32[-1]),
    ):
        assert significant_digits(figure) == 2 and states(figure, value, NOISE_SPREAD), figure
    # The gradients' lower edge the story names: half of float16's smallest subnormal.
    assert float(np.float16(2.0**-25)) == 0.0
    late = slice(config.steps // 2, None)
    flushed = float(np.mean(run.mixed_flushed_share[late]))
    rounded = float(np.mean(run.mixed_lost_share[late]))
    assert f"{flushed:.0%} of the updates per step were flushed and {rounded:.1%} rounded" in text
    assert flushed >= 0.5 and rounded <= 0.01  # what "stalls because they flush" rests on


def test_using_page_inspector_examples_hold():
    """65519.99998 rounds once to float16's 65504 (numpy rounds float64 -> float16 correctly),
    through float32 first it becomes inf; 0x3c00:float16 is 1."""
    import numpy as np

    from playground.core.inspector.inspector import bit_view

    text = _flat(page("using"))
    assert "65519.99998 is 65504 in float16" in text and "(65520) would tie up to inf" in text
    assert np.float16(65519.99998) == 65504 and np.float32(65519.99998) == 65520
    with np.errstate(over="ignore"):
        assert np.isinf(np.float16(np.float32(65519.99998)))
    assert bit_view("65519.99998", "float16").stored == 65504
    assert "`0x3c00:float16` is 1" in text
    assert np.array([0x3C00], np.uint16).view(np.float16)[0] == 1.0
    assert bit_view("0x3c00:float16", "float16").stored == 1.0


def test_docs_numbers_of_pins_export_presets_and_blocks_are_the_codes():
    from playground.core.lessons.precision import PRECISION_LESSONS
    from playground.core.model.op_policy import PRESETS, TORCH_VERSION
    from playground.core.recipes import block_formats as blocks
    from playground.core.recipes.registry import RECIPES
    from playground.core.settings.settings import StepConfig, settings
    from playground.sections.dynamics.pins import MAX_PINS
    from playground.views.export_text import MAX_SCRIPT_BYTES

    using, lessons, calling = (_flat(page(name)) for name in ("using", "lessons", "calling"))
    assert "(at most 4, the oldest dropped" in using and MAX_PINS == 4
    assert "an upload over 2 MB" in using and MAX_SCRIPT_BYTES == 2_000_000
    text = lessons
    assert "as torch 2.13's CPU autocast does" in text and TORCH_VERSION.startswith("2.13.")
    assert PRESETS["exercise"].float32_kinds == frozenset()
    assert "normalisation, a transformer's attention and the loss, as torch" in text
    assert PRESETS["autocast"].float32_kinds == {"normalisation", "attention", "loss"}
    assert PRESETS["all_float32_but_matmul"].float32_kinds == {
        "activation",
        "normalisation",
        "attention",
        "loss",
    }
    assert "Three checked lessons" in text and len(PRECISION_LESSONS) == 3
    # The block-scaled recipes are compute dtypes, their settings in the documented ranges.
    block_names = [f"`{name}`" for name, entry in RECIPES.items() if entry.block is not None]
    named = ", ".join(block_names[:-1]) + " or " + block_names[-1]
    assert f"(`compute_dtype` = {named};" in text
    for name in block_names:
        assert StepConfig(compute_dtype=name.strip("`")).compute_dtype == name.strip("`")
    table, defaults = settings(), StepConfig()
    assert "`outlier_share` (0 to 0.01, default 0: no outliers)" in calling
    assert (table["outlier_share"].low, table["outlier_share"].high) == (0.0, 0.01)
    assert defaults.outlier_share == 0.0
    assert "`outlier_scale` (1 to 65536, default 65536)" in calling
    assert (table["outlier_scale"].low, table["outlier_scale"].high) == (1.0, 2.0**16)
    assert defaults.outlier_scale == 2.0**16 and defaults.nvfp4_hadamard == "on"
    e4m3, e2m1 = blocks.element_facts("float8_e4m3fn"), blocks.element_facts("float4_e2m1fn")
    assert (e4m3.max, e4m3.emax, e2m1.max) == (448.0, 8, 6.0)
    assert "E4M3 elements in blocks of 32" in text and blocks.MXFP8.block == 32
    assert blocks.MXFP8.scale_format == "float8_e8m0fnu" and blocks.MXFP8.scale_rule == "round_up"
    assert "1 x 128 tiles for activations and gradients and 128 x 128 for weights" in text
    assert (blocks.FP8_BLOCK.block, blocks.FP8_BLOCK.weight_tile) == (128, (128, 128))
    assert "E2M1 elements (largest 6) in blocks of 16 (16 x 16 tiles for weights)" in text
    assert (blocks.NVFP4.block, blocks.NVFP4.weight_tile) == (16, (16, 16))
    assert blocks.NVFP4.stochastic_gradients and blocks.NVFP4.hadamard_block == 16


def _api_names(line: str) -> list[str]:
    return [name.strip() for name in line.split(",") if name.strip()]


def test_calling_page_input_orders_are_the_endpoints_signatures():
    """The documented order is each endpoint's own (block-scaling settings may follow /step's
    list once registered: the list must be a prefix, every rule below exact)."""
    import inspect

    from playground.ui.endpoints import run_downloads, run_export, run_step
    from playground.ui.tabs.dynamics import dynamics_endpoint
    from playground.ui.tabs.lab import inspect_event, sweep_endpoint

    block = re.search(
        r"```text\n/step, /downloads(.*?)\n/sweep(.*?)```", page("calling"), re.DOTALL
    )
    assert block, "the calling page's table of input orders"
    rows = re.findall(r"^(/\w+(?:, /\w+)?)\s+(.*(?:\n {19}.*)*)", block.group(0), re.M)
    said = {name: _flat(rest) for name, rest in rows}

    def names(fn) -> list[str]:
        return list(inspect.signature(fn).parameters)

    step = names(run_step)
    documented = _api_names(said["/step, /downloads"])
    assert step[: len(documented)] == documented and names(run_downloads) == step
    assert said["/sweep"] == "/step's inputs with downloads after amax_history"
    sweep = list(step)
    sweep.insert(sweep.index("amax_history") + 1, "downloads")
    assert names(sweep_endpoint) == sweep
    dynamics = list(step)
    after_dtype = dynamics.index("compute_dtype") + 1
    dynamics[after_dtype:after_dtype] = ["steps", "mode", "period"]
    after_history = dynamics.index("amax_history") + 1
    dynamics[after_history:after_history] = ["pure_rounding", "downloads"]
    assert said["/dynamics"] == (
        "/step's inputs with steps, mode, period after compute_dtype and pure_rounding, "
        "downloads after amax_history"
    )
    assert names(dynamics_endpoint) == dynamics
    # The export's own inputs follow nvfp4_hadamard (the last setting when they were added);
    # the settings added since follow them.
    prefix = "/step's inputs up to nvfp4_hadamard, then "
    assert said["/export"].startswith(prefix)
    own, later = said["/export"].removeprefix(prefix).split(", then ")
    cut = step.index("nvfp4_hadamard") + 1
    assert _api_names(later) == step[cut:]
    assert names(run_export) == [*step[:cut], *_api_names(own), *step[cut:]]
    assert names(inspect_event) == _api_names(said["/inspect"]) == ["number"]


def test_calling_page_json_keys_are_in_the_summaries():
    from playground import StepConfig, run_report
    from playground.core.runs.train import run_dynamics
    from playground.sections.dynamics.summary import dynamics_summary
    from playground.sections.step.summary import summarize

    small = StepConfig(n=8, d_in=4, d_out=2, steps=3)
    trees = {
        "step": summarize(run_report(small)),
        "dynamics": dynamics_summary(run_dynamics(small)),
    }
    calling = page("calling")
    step_keys = re.findall(r"`((?:losses|operations)\.[a-z_.]+)`", calling)
    dynamics_keys = re.findall(
        r"`((?:final_loss|mean_lost_share|mean_flushed_share)\.\w+)`", calling
    )
    assert "losses.mixed_initial_in_compute_dtype" in step_keys and "mean_flushed_share.mixed" in (
        dynamics_keys
    )
    for tree, keys in ((trees["step"], step_keys), (trees["dynamics"], dynamics_keys)):
        for key in keys:
            node = tree
            for part in key.split("."):
                assert isinstance(node, dict) and part in node, f"{key} is not in the summary"
                node = node[part]
    assert set(trees["step"]["operations"]["first_nonfinite"]) == {"forward", "backward"}
    assert "dtype" in trees["step"]["operations"]["rows"][0]
    assert {"mixed", "pure"} <= set(trees["dynamics"]["mean_flushed_share"])


def test_docs_element_ids_are_the_pages():
    """Every `#id` the README and the documentation pages name is an elem_id the page sets: a
    literal, an indexed one (`<i>` for ``{index}``), a lesson button's
    (``ui.examples.button_id``), the glossary's or a control's field name."""
    from playground.core.lessons import LESSONS
    from playground.core.settings.settings import settings
    from playground.sections.route.glossary import ANCHOR
    from playground.sections.step.notes import NOTES, note_id
    from playground.ui.examples import button_id

    source = "\n".join(path.read_text() for path in (ROOT / "playground" / "ui").rglob("*.py"))
    ids = set(re.findall(r'elem_id="([\w-]+)"', source))
    ids |= {name.replace("{index}", "<i>") for name in re.findall(r'elem_id=f"([\w{}-]+)"', source)}
    ids |= set(settings()) | {note_id(label) for label in NOTES}
    ids |= {button_id(lesson) for lesson in LESSONS.values()} | {ANCHOR}
    texts = [README, *(path.read_text() for path in sorted(DOCS.glob("*.md")))]
    named = set(re.findall(r"`#([\w<>-]+)`", "\n".join(texts)))
    assert {"pin-run", "lesson-train-pure-kahan", "route-next", "inspect-bits"} <= named
    assert named <= ids, f"not an elem_id of the page: {sorted(named - ids)}"


def test_public_page_first_call_caps_are_the_cost_models():
    """The 'Running it in public' table's training steps (the warm cap: a compile caps
    nothing) and the compile seconds that make a /step large work are the cost model's."""
    from playground.core.settings import compile_cost
    from playground.core.settings.settings import StepConfig

    text = _flat(page("public"))
    said = re.search(
        r"At the largest linear shape a training run takes (\d+) steps, at 1024 x 256 x 128 (\d+)",
        text,
    )
    assert said, "the public page's training steps under the warm cap"
    largest = StepConfig(n=4096, d_in=1024, d_out=1024).max_steps
    medium = StepConfig(n=1024, d_in=256, d_out=128).max_steps
    assert (int(said.group(1)), int(said.group(2))) == (largest, medium)
    assert f"compile reaches {compile_cost.FIRST_CALL_SECONDS:g} s on 2 vCPUs" in text


def test_public_page_states_the_servers_own_bounds():
    """The 'Running it in public' table's body cap, lanes and crowd places are the code's."""
    from playground.ui import crowd, fair_use, upload_guard

    text = _flat(page("public"))
    cap = upload_guard.MAX_BODY_BYTES // 2**10
    assert f"request bodies (every route but uploads) at most {cap} kB" in text
    assert f"every other lane takes {fair_use.LANE_SLOTS} at once" in text
    assert (
        f"at most {crowd.LARGE_PLACES} large requests and {crowd.RUN_PLACES} sweeps or "
        "training runs queued or running at once, from all visitors together"
    ) in text
    assert f"(over 2^{crowd.LARGE_WORK.bit_length() - 1} multiply-adds) computes one" in text
