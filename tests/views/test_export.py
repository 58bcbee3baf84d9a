"""The code export: a standalone script whose printed losses equal the page's, bit for bit: the
step's two new losses and the training run's final losses and skipped steps."""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import io
import json
import math
import os
import pathlib
import re
import runpy
import shutil
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from hypothesis import given
from hypothesis import strategies as st

from playground import StepConfig, make_batch, run_report
from playground.core.data.user_data import UserData, parse_csv
from playground.core.recipes.registry import RECIPES
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import (
    FLOAT32_MAX,
    LOSS_SCALE_MAX,
    LOSS_SCALE_MIN,
    ConfigError,
)
from playground.views import export, export_text
from playground.views.export import EXPORTED_FIELDS, export_filename, export_script

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "playground" / "core" / "export" / "jax_script.py"
MY_FILES = [
    *(ROOT / "playground" / "views" / name for name in ("export.py", "export_text.py")),
    ROOT / "playground" / "views" / "export_torch.py",
    ROOT / "playground" / "views" / "export_note.py",
    ROOT / "playground" / "core" / "export" / "autocast.py",
    ROOT / "playground" / "ui" / "export_panel.py",
    TEMPLATE,
    pathlib.Path(__file__).resolve(),
    pathlib.Path(__file__).resolve().with_name("test_export_torch.py"),
]
# Top-level modules the script may import: the four libraries and the standard library it uses.
ALLOWED_IMPORTS = {"jax", "flax", "optax", "numpy", "base64", "json", "math", "importlib"}

# Both dtypes, several seeds (the largest included), lr values, loss scales 1, 2^10 and 2^15,
# small shapes and the page's default shape, data at 2^-12 for float16, and a float16 overflow
# (NaN); each with a training run: stochastic (bf16-scale1) and Kahan (f16-tiny-2^15, under
# momentum) pure runs, an MLP under Adam whose dynamic scale skips steps, and an upload trained
# by a tanh MLP. Every case's script runs in one fresh process, which imports JAX once.
CASES = {
    "bf16-default": StepConfig(),
    "bf16-scale1": StepConfig(
        model_seed=7,
        data_seed=3,
        n=64,
        d_in=16,
        d_out=4,
        lr=0.5,
        loss_scale=1.0,
        pure_rounding="stochastic",
        steps=40,
    ),
    "f16-tiny-2^15": StepConfig(
        model_seed=1,
        data_seed=2,
        n=64,
        d_in=16,
        d_out=4,
        lr=0.05,
        loss_scale=2.0**15,
        input_scale=2.0**-12,
        target_scale=2.0**-12,
        compute_dtype="float16",
        optimizer="momentum",
        mode="none",
        pure_rounding="kahan",
        steps=25,
    ),
    "f16-tiny-unscaled": StepConfig(
        model_seed=2**32 - 1,
        n=32,
        d_in=8,
        d_out=4,
        lr=0.3,
        loss_scale=1.0,
        input_scale=2.0**-12,
        target_scale=2.0**-12,
        compute_dtype="float16",
    ),
    "f16-overflow": StepConfig(
        n=32, d_in=8, d_out=4, target_scale=2.0**10, compute_dtype="float16"
    ),
    "mlp-adam-dynamic": StepConfig(
        model_seed=3,
        n=40,
        d_in=12,
        d_out=3,
        model="mlp",
        hidden_layers=2,
        hidden_width=16,
        activation="gelu",
        optimizer="adam",
        lr=0.01,
        compute_dtype="float16",
        mode="dynamic",
        period=4,
        loss_scale=2.0**15,
        target_scale=2.0**5,
        steps=30,
    ),
    "upload": StepConfig(
        d_out=2,
        model="mlp",
        hidden_layers=1,
        hidden_width=8,
        activation="tanh",
        lr=0.05,
        optimizer="momentum",
        steps=20,
        mode="dynamic",
    ),
}


def _upload() -> UserData:
    """A CSV of 20 rows, 5 input columns and 2 targets, with a header, parsed as the page does."""
    values = np.random.default_rng(5).standard_normal((20, 7)).round(4)
    rows = ["a,b,c,d,e,y1,y2", *(",".join(map(str, row)) for row in values)]
    return parse_csv("\n".join(rows).encode(), d_out=2, name="mine.csv")


UPLOADS = {"upload": _upload()}


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH, so the checkout is not importable."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def _run(path: pathlib.Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, path.name],
        cwd=path.parent,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


# Runs each script given as it runs alone (as __main__, from its own directory, which is the
# first place imports look): one line per script, what it printed or the error that ended it.
RUNNER = """
import contextlib, io, json, os, runpy, sys, traceback
for path in sys.argv[1:]:
    printed, error = io.StringIO(), ""
    os.chdir(os.path.dirname(path))
    sys.path[0] = os.path.dirname(path)
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(path, run_name="__main__")
    except BaseException:
        error = traceback.format_exc()
    print(json.dumps({"stdout": printed.getvalue(), "stderr": error}), flush=True)
"""


@pytest.fixture(scope="module")
def scripts(tmp_path_factory) -> dict[str, pathlib.Path]:
    """Each case's script, written to its own fresh directory."""
    paths = {}
    for name, config in CASES.items():
        directory = tmp_path_factory.mktemp(f"export-{name}")
        paths[name] = directory / export_filename(config)
        paths[name].write_text(export_script(config, UPLOADS.get(name)))
    return paths


@pytest.fixture(scope="module")
def runs(scripts, tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    """Every script run in one fresh process without the checkout on its path (JAX imported
    once, not once per script): per case, what it printed, and its error as a failed run."""
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, *map(str, scripts.values())],
        cwd=tmp_path_factory.mktemp("runner"),
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [json.loads(line) for line in run.stdout.strip().splitlines()]
    return {
        name: subprocess.CompletedProcess(path.name, int(bool(ran["stderr"])), **ran)
        for (name, path), ran in zip(scripts.items(), lines, strict=True)
    }


def _strict_json(line: str) -> dict:
    def refuse(token):
        raise ValueError(f"non-strict JSON token {token}")

    return json.loads(line, parse_constant=refuse)


def _as_float32(value) -> np.float32:
    """A JSON loss as float32: a number, or one of the strings "nan", "inf", "-inf"."""
    if isinstance(value, str):
        assert value in ("nan", "inf", "-inf")
        return np.float32(float(value))
    assert isinstance(value, float) and math.isfinite(value)
    return np.float32(value)


def _same(value, expected: float) -> bool:
    ours, page = _as_float32(value), np.float32(expected)
    # The same float32 bits, or NaN on both sides (whatever its payload).
    return ours.tobytes() == page.tobytes() or bool(np.isnan(ours) and np.isnan(page))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_script_reproduces_the_page_bit_for_bit(name, runs):
    config, run, data = CASES[name], runs[name], UPLOADS.get(name)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = _strict_json(run.stdout.strip().splitlines()[-1])
    report = run_report(config, data)
    dynamics = run_dynamics(config, data=data)
    for key in ("float32", "mixed", "pure"):
        page = getattr(dynamics, f"{key}_loss")[-1]
        assert _same(summary["final_loss"][key], page), (key, summary["final_loss"], page)
    for key in ("mixed", "pure"):
        assert summary["skipped_steps"][key] == int(getattr(dynamics, f"{key}_skipped").sum())

    assert _same(summary["mixed_new"], report.mixed_new_loss), (
        summary["mixed_new"],
        report.mixed_new_loss,
    )
    assert _same(summary["float32_new"], report.float32_new_loss), (
        summary["float32_new"],
        report.float32_new_loss,
    )
    # The config it ran, under the page's field names, so it can be fed back to the page (the
    # options of a model it does not use at their defaults; N and D_in from an upload).
    assert list(summary["config"]) == list(EXPORTED_FIELDS)
    ran = StepConfig(**summary["config"])
    assert ran.model_choice == config.model_choice
    assert ran.shape == (report.config.n, report.config.d_in, config.d_out)
    options = {"hidden_layers", "hidden_width", "activation", "n", "d_in"}
    for field in set(EXPORTED_FIELDS) - options:
        assert summary["config"][field] == getattr(config, field), field
    assert set(summary["versions"]) >= {"jax", "flax", "optax", "numpy"}


@pytest.mark.slow
def test_the_run_comparison_covers_skipped_steps(runs):
    """Not vacuous: a run whose dynamic scale skips steps, in both low-precision runs."""
    summary = _strict_json(runs["mlp-adam-dynamic"].stdout.strip().splitlines()[-1])
    assert summary["skipped_steps"]["mixed"] >= 1 and summary["skipped_steps"]["pure"] >= 1


@pytest.mark.slow
def test_the_overflow_case_prints_documented_strings(runs):
    summary = _strict_json(runs["f16-overflow"].stdout.strip().splitlines()[-1])
    assert summary["mixed_new"] == "nan"
    assert isinstance(summary["float32_new"], float)


def test_scripts_run_without_the_playground_package(scripts):
    directory = scripts["f16-overflow"].parent
    probe = subprocess.run(
        [sys.executable, "-c", "import playground"],
        cwd=directory,
        env=_clean_env(),
        capture_output=True,
        text=True,
    )
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr
    for path in scripts.values():
        assert "playground" not in _imported_modules(path.read_text())


def _imported_modules(text: str) -> set[str]:
    modules = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module
            modules.add(node.module.split(".")[0])
    return modules


@pytest.mark.parametrize("name", list(CASES))
def test_script_imports_only_allowed_modules(name):
    modules = _imported_modules(export_script(CASES[name]))
    assert modules <= ALLOWED_IMPORTS, modules - ALLOWED_IMPORTS
    assert {"jax", "flax", "optax", "numpy"} <= modules


@pytest.mark.parametrize("name", ["bf16-default", "f16-tiny-2^15"])
def test_script_rebuilds_the_batch_bit_for_bit(name, tmp_path):
    """The script's make_batch, loaded without running main(), against the page's."""
    config = CASES[name]
    path = tmp_path / export_filename(config)
    path.write_text(export_script(config))
    namespace = runpy.run_path(str(path), run_name="exported_script")
    x, y = namespace["make_batch"]()
    page_x, page_y = make_batch(config)
    for ours, page in ((x, page_x), (y, page_y)):
        assert ours.dtype == page.dtype == np.float32 and ours.shape == page.shape
        assert ours.tobytes() == page.tobytes()


def test_a_degenerate_matmul_stays_within_a_few_ulp(tmp_path):
    """The documented gap: with D_in = 1 XLA may fuse the page's products into FMAs differently.

    Run in this process (main() of the loaded script), which compiles the same program as a
    fresh process would.
    """
    config = StepConfig(n=3, d_in=1, d_out=1, lr=1.7)
    path = tmp_path / export_filename(config)
    path.write_text(export_script(config))
    namespace = runpy.run_path(str(path), run_name="exported_script")
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        namespace["main"]()
    summary = _strict_json(output.getvalue().strip().splitlines()[-1])
    report = run_report(config)
    for ours, page in (
        (summary["mixed_new"], report.mixed_new_loss),
        (summary["float32_new"], report.float32_new_loss),
    ):
        np.testing.assert_array_max_ulp(_as_float32(ours), np.float32(page), maxulp=4)


def test_script_is_readable():
    config = CASES["f16-tiny-2^15"]
    text = export_script(config)
    module = ast.parse(text)
    docstring = ast.get_docstring(module)
    assert "mixed_precision_step" in docstring and "train" in docstring
    assert export_filename(config) in docstring
    # Each setting is a constant named after its field, with the page's label beside it.
    for field in EXPORTED_FIELDS:
        label = export.settings()[field].label
        assert re.search(rf"^{field.upper()} = .*  # {re.escape(label)}$", text, re.M), field
    # The settings are named constants, assigned once at the top, before any function.
    first_def = next(i for i, node in enumerate(module.body) if isinstance(node, ast.FunctionDef))
    settings = {field.upper() for field in EXPORTED_FIELDS}
    constants = {
        target.id: ast.literal_eval(node.value) if not isinstance(node.value, ast.BinOp) else None
        for node in module.body[:first_def]
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id in settings
    }
    assert set(constants) == settings
    assert constants["COMPUTE_DTYPE"] == "float16" and constants["N"] == 64
    assert "LOSS_SCALE = 2.0**15" in text and "INPUT_SCALE = 2.0**-12" in text
    functions = {node.name for node in module.body if isinstance(node, ast.FunctionDef)}
    assert {"make_batch", "mixed_precision_step", "float32_step", "train", "main"} <= functions
    # Every function explains itself, and the step's body is commented.
    for node in module.body:
        if isinstance(node, ast.FunctionDef) and node.name != "main":
            assert ast.get_docstring(node), node.name
    step_source = text[text.index("def mixed_precision_step") : text.index("def float32_step")]
    assert step_source.count("#") >= 4
    assert text.endswith('if __name__ == "__main__":\n    main()\n')


def test_export_filename():
    assert export_filename(StepConfig()) == "mixed_precision_step_bfloat16_seed0.py"
    assert (
        export_filename(StepConfig(model_seed=12, compute_dtype="float16"))
        == "mixed_precision_step_float16_seed12.py"
    )


def test_settings_the_run_does_not_read_do_not_change_the_script():
    """The MLP's options while the model is linear, and float8's while the dtype is not; the
    training run's settings do change it."""
    config = CASES["f16-overflow"]
    ignored = config.replace(hidden_layers=5, hidden_width=3, activation="tanh")
    assert export_script(ignored) == export_script(config)
    assert "STEPS = 10  #" in export_script(config.replace(steps=10))
    assert 'MODE = "dynamic"  #' in export_script(config.replace(mode="dynamic"))
    # float8's settings, while the dtype is not float8.
    assert export_script(config.replace(fp8_scaling="delayed", amax_history=4)) == export_script(
        config
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("compute_dtype", "float8"),
        ("precision_policy", "autocast"),
        ("task", "classification"),
    ],
)
def test_a_run_the_script_cannot_reproduce_is_refused_by_name(field, value):
    with pytest.raises(ConfigError) as raised:
        export_script(StepConfig(model="mlp", **{field: value}))
    assert raised.value.field == field
    assert field in str(raised.value) and repr(value) in str(raised.value)


def test_an_unknown_framework_is_refused_by_name():
    with pytest.raises(ConfigError) as raised:
        export_script(StepConfig(), framework="tensorflow")
    assert raised.value.field == "framework" and "jax, pytorch" in str(raised.value)


def test_an_upload_over_the_embedding_cap_is_refused_by_name():
    """4,000 rows of 80 values: 320,000 values, over the 300,000 a script under 2 MB holds."""
    x = np.zeros((4000, 64), np.float32)
    big = UserData("big.csv", x, np.zeros((4000, 16), np.float32))
    with pytest.raises(ConfigError) as raised:
        export_script(StepConfig(), big)
    assert raised.value.field == "data"
    assert "320,000" in str(raised.value) and "300,000" in str(raised.value)


def test_the_upload_is_embedded_exactly(tmp_path):
    """The script's make_batch, loaded without running main(), gives the upload's bits."""
    data = UPLOADS["upload"]
    path = tmp_path / "upload.py"
    path.write_text(export_script(CASES["upload"], data))
    x, y = runpy.run_path(str(path), run_name="exported_script")["make_batch"]()
    assert x.tobytes() == data.x.tobytes() and y.tobytes() == data.y.tobytes()
    assert x.shape == data.x.shape and y.shape == data.y.shape


@given(
    st.one_of(
        st.floats(min_value=0.0, max_value=FLOAT32_MAX),
        st.floats(min_value=LOSS_SCALE_MIN, max_value=LOSS_SCALE_MAX),
        st.integers(min_value=-200, max_value=200).map(lambda k: 2.0**k),
        st.integers(min_value=0, max_value=2**32 - 1),
        st.sampled_from(export.SCRIPT_DTYPES),
    )
)
def test_literals_evaluate_to_the_same_value(value):
    source = export_text.literal(value)
    assert eval(source) == value and type(eval(source)) is type(value)


def test_the_template_is_the_export_of_the_page_defaults():
    """Rendering rewrites only the settings: for the defaults it gives the template itself."""
    assert export_script(StepConfig()) == TEMPLATE.read_text(encoding="utf-8")


def _new_loss_in_float64(config: StepConfig, rounded) -> float:
    """The exercise's step, computed here in float64 numpy: one SGD step of
    mean((x @ kernel + bias - y) ** 2) from nnx.Linear's initial parameters, with x, y and the
    parameters passed through ``rounded`` where the exercise casts them (the gradient goes
    straight through a cast, and the loss scale cancels exactly); returns the new loss."""
    x, y = (rounded(np.asarray(a, np.float64)) for a in make_batch(config))
    layer = nnx.Linear(config.d_in, config.d_out, rngs=nnx.Rngs(config.model_seed))
    kernel, bias = (np.asarray(param[...], np.float64) for param in (layer.kernel, layer.bias))

    def residual(kernel, bias):
        return x @ rounded(kernel) + rounded(bias) - y

    grad_residual = 2 * residual(kernel, bias) / (config.n * config.d_out)
    kernel = kernel - config.lr * (x.T @ grad_residual)
    bias = bias - config.lr * grad_residual.sum(axis=0)
    return float(np.mean(residual(kernel, bias) ** 2))


@pytest.mark.slow
def test_the_template_runs_as_it_is(tmp_path):
    """The template file alone in a fresh directory, run without the package on the path, prints
    the losses of its settings (the page's defaults, bfloat16): the float32 twin's within 1e-6 of
    the exercise's step in float64, the mixed step's a bfloat16 value within one bfloat16 unit in
    the last place of that step with x, y and the parameters rounded to bfloat16. A step not taken
    leaves the loss about 3% (four such units) higher; an update left scaled diverges."""
    path = tmp_path / TEMPLATE.name
    shutil.copyfile(TEMPLATE, path)
    run = _run(path)
    assert run.returncode == 0, run.stderr[-3000:]
    summary = _strict_json(run.stdout.strip().splitlines()[-1])
    config = StepConfig(**summary["config"])
    assert config == StepConfig()

    exact = _new_loss_in_float64(config, lambda a: a)
    assert abs(summary["float32_new"] - exact) <= 1e-6 * exact, (summary["float32_new"], exact)

    bfloat16 = jnp.dtype(config.compute_dtype)
    rounded = _new_loss_in_float64(config, lambda a: a.astype(bfloat16).astype(np.float64))
    mixed = summary["mixed_new"]
    assert float(np.float64(mixed).astype(bfloat16)) == mixed  # the loss is computed in bfloat16
    unit = float(jnp.finfo(bfloat16).eps) * 2.0 ** math.floor(math.log2(rounded))
    assert abs(mixed - rounded) <= unit, (mixed, rounded, unit)


def test_a_template_out_of_shape_is_refused(monkeypatch):
    text = TEMPLATE.read_text(encoding="utf-8")
    monkeypatch.setattr(export, "template", lambda name: text.replace("# --- end of settings", "#"))
    with pytest.raises(RuntimeError, match="one settings block"):
        export_script(StepConfig())


def test_the_package_never_imports_the_template():
    """It is read as text: no module of the package imports it (so it can stay a plain script)."""
    template = "playground.core.export.jax_script"
    for path in (ROOT / "playground").rglob("*.py"):
        package = ".".join(path.relative_to(ROOT).parent.parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:  # relative: from the package, node.level - 1 packages up
                    parts = package.split(".")
                    anchor = parts[: len(parts) - node.level + 1]
                    module = ".".join([*anchor, module] if module else anchor)
                names = [module] + [f"{module}.{alias.name}" for alias in node.names]
            else:
                continue
            assert template not in names, f"{path.relative_to(ROOT)}:{node.lineno} imports it"


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )


needs_ruff = pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="no ruff")


@needs_ruff
def test_my_files_are_ruff_clean():
    files = [str(path) for path in MY_FILES]
    check = _ruff("check", *files)
    assert check.returncode == 0, check.stdout
    formatted = _ruff("format", "--check", *files)
    assert formatted.returncode == 0, formatted.stdout


@needs_ruff
@pytest.mark.parametrize(
    ("name", "framework"),
    [("bf16-default", "jax"), ("upload", "jax"), ("mlp-adam-dynamic", "pytorch")],
)
def test_generated_script_is_ruff_clean(name, framework, tmp_path):
    """With ruff's own defaults (line length 88), not this project's settings."""
    path = tmp_path / export_filename(CASES[name], framework)
    path.write_text(export_script(CASES[name], UPLOADS.get(name), framework))
    compile(path.read_text(), str(path), "exec")
    check = _ruff("check", "--isolated", "--select", "E,F,W", str(path))
    assert check.returncode == 0, check.stdout
    formatted = _ruff("format", "--isolated", "--check", str(path))
    assert formatted.returncode == 0, formatted.stdout


def _run_exported(script: str, directory: pathlib.Path) -> dict:
    """``script`` run in ``directory`` without the package on the path: its last line."""
    path = directory / "exported.py"
    path.write_text(script)
    result = subprocess.run(
        [sys.executable, str(path)],
        cwd=directory,
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    return _strict_json(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_export_endpoint_serves_the_script_the_page_would_run(client, tmp_path):
    """Through the launched app: an old positional /export call's script, run without the
    package, prints /step's new losses and /dynamics' final losses (at the training run's
    defaults) bit for bit; the appended inputs, by keyword, give a PyTorch script of a shorter
    dynamic run whose losses agree with the page's within the dtype's precision."""
    args = (0, 32, 8, 4, 0.1, 1024.0)
    script, script_file = client.predict(*args, api_name="/export")
    _, summary, *_ = client.predict(*args, api_name="/step")
    _, run_summary, *_ = client.predict(*args, api_name="/dynamics")
    assert script_file.endswith(".py") and "import playground" not in script
    printed = _run_exported(script, tmp_path)
    assert printed["mixed_new"] == summary["losses"]["mixed_new"]
    assert printed["float32_new"] == summary["losses"]["float32_new"]
    assert printed["final_loss"] == run_summary["final_loss"]

    run = {"steps": 12, "mode": "dynamic", "period": 3}
    script, script_file = client.predict(*args, **run, framework="pytorch", api_name="/export")
    _, run_summary, *_ = client.predict(*args, **run, api_name="/dynamics")
    assert script_file.endswith(".py") and "torch.amp.GradScaler(" in script
    (tmp_path / "torch").mkdir()
    printed = _run_exported(script, tmp_path / "torch")
    page = summary["losses"] | {f"final {k}": v for k, v in run_summary["final_loss"].items()}
    ours = {"mixed_new": printed["mixed_new"], "float32_new": printed["float32_new"]}
    ours |= {f"final {k}": v for k, v in printed["final_loss"].items()}
    for key, tolerance in (("float32_new", 1e-5), ("final float32", 1e-5), ("mixed_new", 1e-2)):
        assert abs(ours[key] - page[key]) <= tolerance * abs(page[key]), (key, ours, page)
    assert abs(ours["final mixed"] - page["final mixed"]) <= 1e-2 * abs(page["final mixed"])
    assert printed["skipped_steps"]["mixed"] == len(run_summary["mixed_skipped_steps"])


@pytest.mark.slow
def test_export_refuses_a_block_recipe_for_pytorch_through_the_app(client):
    from gradio_client.exceptions import AppError

    block = next(name for name, entry in RECIPES.items() if entry.block is not None)
    with pytest.raises(AppError, match="compute_dtype"):
        client.predict(compute_dtype=block, framework="pytorch", api_name="/export")
