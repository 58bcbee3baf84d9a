"""The PyTorch export, with PyTorch as the peer: run without the package, its losses match the
page's within the compute dtype's precision, and GradScaler skips the steps the page skips.

Every configuration's script runs in ONE fresh process (importing torch once), in a directory
of its own with a PYTHONPATH that does not hold the checkout. The measured largest relative
differences are written to tests/artifacts/export_torch_agreement.json.
"""

from __future__ import annotations

import ast
import json
import os
import pathlib
import runpy
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from flax import nnx

from playground import StepConfig, run_report
from playground.core.export.autocast import autocast_new_loss
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import ConfigError
from playground.views.export import export_filename, export_script
from playground.views.export_note import FLOAT32_AGREEMENT, agreement_bound, estimate_bound
from playground.views.export_text import MAX_SCRIPT_BYTES
from playground.views.export_torch import TEMPLATE_CONFIG

pytestmark = pytest.mark.slow

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATE = ROOT / "playground" / "core" / "export" / "torch_script.py"
ARTIFACTS = ROOT / "tests" / "artifacts"
# The tolerances: relative difference from the page's loss, by the dtype it was computed in.
TOLERANCE = {"float32": 1e-5, "bfloat16": 1e-2, "float16": 1e-3}
STEPS = 10

# Models x optimizers x dtypes x loss-scaling modes, each value of each at least three times,
# with seeds, shapes, widths, activations and scales varied. "skips" overflows on purpose: a
# float16 run at S = 2^15 on targets of order 2^5, which dynamic scaling backs off from.
CONFIGS = {
    "linear-sgd-bf16-static": StepConfig(n=32, d_in=8, d_out=4, steps=STEPS),
    "linear-momentum-f16-dynamic": StepConfig(
        model_seed=3,
        data_seed=7,
        n=40,
        d_in=12,
        d_out=3,
        optimizer="momentum",
        lr=0.05,
        compute_dtype="float16",
        mode="dynamic",
        period=3,
        loss_scale=2.0**8,
        steps=STEPS,
    ),
    "linear-adam-bf16-none": StepConfig(
        model_seed=11,
        data_seed=2,
        n=24,
        d_in=6,
        d_out=5,
        optimizer="adam",
        lr=0.01,
        mode="none",
        steps=STEPS,
    ),
    "mlp-relu-sgd-f16-none": StepConfig(
        model_seed=5,
        data_seed=5,
        n=48,
        d_in=10,
        d_out=2,
        model="mlp",
        hidden_layers=1,
        hidden_width=16,
        optimizer="sgd",
        lr=0.05,
        compute_dtype="float16",
        mode="none",
        steps=STEPS,
    ),
    "mlp-gelu-momentum-bf16-static": StepConfig(
        model_seed=2**32 - 1,
        data_seed=9,
        n=32,
        d_in=8,
        d_out=4,
        model="mlp",
        hidden_layers=2,
        hidden_width=12,
        activation="gelu",
        optimizer="momentum",
        lr=0.05,
        steps=STEPS,
    ),
    "mlp-tanh-adam-f16-static": StepConfig(
        model_seed=8,
        data_seed=1,
        n=40,
        d_in=12,
        d_out=3,
        model="mlp",
        hidden_layers=1,
        hidden_width=8,
        activation="tanh",
        optimizer="adam",
        lr=0.01,
        compute_dtype="float16",
        loss_scale=2.0**12,
        steps=STEPS,
    ),
    "mlp-relu-adam-bf16-dynamic": StepConfig(
        model_seed=4,
        data_seed=4,
        n=24,
        d_in=6,
        d_out=5,
        model="mlp",
        hidden_layers=2,
        hidden_width=8,
        optimizer="adam",
        lr=0.01,
        mode="dynamic",
        period=2,
        steps=STEPS,
    ),
    "linear-sgd-f16-static-tiny": StepConfig(
        model_seed=6,
        data_seed=6,
        n=32,
        d_in=8,
        d_out=4,
        lr=0.3,
        compute_dtype="float16",
        loss_scale=2.0**15,
        input_scale=2.0**-6,
        target_scale=2.0**-6,
        steps=STEPS,
    ),
    "mlp-tanh-sgd-bf16-dynamic": StepConfig(
        model_seed=12,
        data_seed=3,
        n=48,
        d_in=10,
        d_out=2,
        model="mlp",
        hidden_layers=1,
        hidden_width=16,
        activation="tanh",
        lr=0.1,
        mode="dynamic",
        period=4,
        loss_scale=2.0**4,
        steps=STEPS,
    ),
    "skips": StepConfig(
        model_seed=1,
        data_seed=8,
        n=40,
        d_in=12,
        d_out=3,
        lr=0.001,
        compute_dtype="float16",
        mode="dynamic",
        period=1000,
        loss_scale=2.0**15,
        target_scale=2.0**5,
        steps=STEPS,
    ),
}

RUNNER = """
import contextlib, io, runpy, sys
for path in sys.argv[1:]:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        runpy.run_path(path, run_name="__main__")
    print(printed.getvalue().strip().splitlines()[-1], flush=True)
"""


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH, so the checkout is not importable."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONPATH"}


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> dict[str, dict]:
    """Every configuration's script, each in a fresh directory, run in one fresh process: the
    last line each printed, parsed."""
    paths = []
    for name, config in CONFIGS.items():
        path = tmp_path_factory.mktemp(f"torch-{name}") / export_filename(config, "pytorch")
        path.write_text(export_script(config, framework="pytorch"))
        paths.append(str(path))
    run = subprocess.run(
        [sys.executable, "-c", RUNNER, *paths],
        cwd=tmp_path_factory.mktemp("runner"),
        env=_clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = run.stdout.strip().splitlines()
    return {name: json.loads(line) for name, line in zip(CONFIGS, lines, strict=True)}


def _relative(ours: float, page: float) -> float:
    return abs(ours - page) / abs(page)


@pytest.fixture(scope="module")
def differences(printed) -> dict[str, dict[str, float]]:
    """Per configuration, the relative difference of each loss from the page's (the step's from
    run_report, the run's from run_dynamics), keyed by the dtype that computed it."""
    found = {}
    for name, config in CONFIGS.items():
        summary, report, run = printed[name], run_report(config), run_dynamics(config)
        overflowed = any(param.nonfinite_count for param in report.params.values())
        found[name] = {
            "page step overflowed": overflowed,
            "script step loss": summary["mixed_new"],
            "float32 step": _relative(summary["float32_new"], report.float32_new_loss),
            "float32 run": _relative(summary["final_loss"]["float32"], float(run.float32_loss[-1])),
            "mixed step": _relative(summary["mixed_new"], report.mixed_new_loss),
            "mixed run": _relative(summary["final_loss"]["mixed"], float(run.mixed_loss[-1])),
            "estimate": _relative(summary["mixed_new"], autocast_new_loss(config)),
            "skipped": (summary["skipped_steps"]["mixed"], int(run.mixed_skipped.sum())),
        }
    worst: dict[str, float] = {}
    for name, found_here in found.items():
        dtype = CONFIGS[name].compute_dtype
        for what in ("float32 step", "float32 run", "mixed step", "mixed run", "estimate"):
            if what in ("mixed step", "estimate") and found_here["page step overflowed"]:
                continue  # GradScaler skipped the step the page applied (a documented difference)
            key = what if what.startswith("float32") else f"{dtype} {what}"
            worst[key] = max(worst.get(key, 0.0), found_here[what])
    ARTIFACTS.mkdir(exist_ok=True)
    (ARTIFACTS / "export_torch_agreement.json").write_text(json.dumps(worst, indent=2))
    return found


@pytest.mark.parametrize("name", list(CONFIGS))
def test_pytorch_matches_the_page_within_the_dtype(name, differences):
    found, dtype = differences[name], CONFIGS[name].compute_dtype
    assert found["float32 step"] <= TOLERANCE["float32"], found
    assert found["float32 run"] <= TOLERANCE["float32"], found
    assert found["mixed run"] <= TOLERANCE[dtype], found
    if not found["page step overflowed"]:
        assert found["mixed step"] <= TOLERANCE[dtype], found


@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_page_note_s_bounds_hold(name, differences):
    """The PyTorch note's claims: a step's mixed loss within the dtype's eps (ml_dtypes' own),
    float32 losses within FLOAT32_AGREEMENT."""
    found, dtype = differences[name], CONFIGS[name].compute_dtype
    assert agreement_bound(dtype) == float(ml_dtypes.finfo(np.dtype(dtype)).eps)
    assert max(found["float32 step"], found["float32 run"]) <= FLOAT32_AGREEMENT
    if not found["page step overflowed"]:
        assert found["mixed step"] <= agreement_bound(dtype), found


@pytest.mark.parametrize("name", list(CONFIGS))
def test_pytorch_s_step_is_near_the_page_s_autocast_estimate(name, differences):
    """The note's measured line: core.export.autocast's estimate of PyTorch's loss after the
    step, which PyTorch itself matches within estimate_bound (half the dtype's eps)."""
    found, dtype = differences[name], CONFIGS[name].compute_dtype
    if not found["page step overflowed"]:
        assert found["estimate"] <= estimate_bound(dtype), found


def test_the_estimate_is_nearer_pytorch_than_the_page_on_the_whole(differences):
    """Rounding as autocast does explains most of the page's difference from PyTorch."""
    kept = [found for found in differences.values() if not found["page step overflowed"]]
    assert sum(f["estimate"] for f in kept) < sum(f["mixed step"] for f in kept) / 2


def test_a_fixed_scale_step_that_overflows_is_skipped_by_grad_scaler(differences):
    """The page's static scale applies an overflowed step (the exercise: its loss is NaN);
    GradScaler skips it even at a fixed scale, so the script's loss after it stays finite."""
    found = differences["skips"]
    assert found["page step overflowed"] and np.isnan(found["mixed step"])
    assert isinstance(found["script step loss"], float)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_grad_scaler_skips_the_steps_the_page_skips(name, differences):
    ours, page = differences[name]["skipped"]
    assert ours == page


def test_the_overflow_case_skips_at_all(differences):
    """The skip comparison is not vacuous: the overflowing run skips in both."""
    ours, page = differences["skips"]["skipped"]
    assert ours == page >= 2


def test_scripts_are_not_bit_for_bit_copies(differences):
    """autocast rounds elsewhere than the exercise: some mixed loss differs from the page's."""
    assert max(found["mixed step"] for found in differences.values()) > 0


def test_the_starting_parameters_are_flax_initializers(tmp_path):
    """The script's model, loaded without running main(), holds nnx's own draws for the model
    seed, each kernel as nn.Linear's weight (transposed), under the page's names."""
    config = CONFIGS["mlp-gelu-momentum-bf16-static"]
    path = tmp_path / "script.py"
    path.write_text(export_script(config, framework="pytorch"))
    namespace = runpy.run_path(str(path), run_name="exported_script")
    model = namespace["build_model"]()
    linears = [layer for layer in model.modules() if isinstance(layer, torch.nn.Linear)]
    rngs = nnx.Rngs(config.model_seed)
    widths = [config.d_in, *[config.hidden_width] * config.hidden_layers, config.d_out]
    layers = [nnx.Linear(a, b, rngs=rngs) for a, b in zip(widths[:-1], widths[1:], strict=True)]
    assert len(linears) == len(layers) == 3
    assert [name for name, _ in model.named_parameters()][:2] == [
        "layers.0.weight",
        "layers.0.bias",
    ]
    for ours, flax_layer in zip(linears, layers, strict=True):
        np.testing.assert_array_equal(ours.weight.detach().numpy(), np.asarray(flax_layer.kernel).T)
        np.testing.assert_array_equal(ours.bias.detach().numpy(), np.asarray(flax_layer.bias))
    assert isinstance(model.activation, torch.nn.GELU) and model.activation.approximate == "tanh"


def test_the_template_is_the_export_of_its_own_settings():
    assert export_script(TEMPLATE_CONFIG, framework="pytorch") == TEMPLATE.read_text("utf-8")


def test_the_script_is_written_as_a_pytorch_user_would():
    text = export_script(CONFIGS["linear-momentum-f16-dynamic"], framework="pytorch")
    for phrase in (
        'torch.autocast(device_type="cpu", dtype=DTYPE)',
        "torch.amp.GradScaler(",
        "growth_interval=PERIOD",
        "torch.optim.SGD(",
        "torch.optim.Adam(",
        "nn.Linear(",
        "scaler.scale(loss).backward()",
        "scaler.step(optimizer)",
    ):
        assert phrase in text, phrase
    assert 'COMPUTE_DTYPE = "float16"' in text and "PERIOD = 3" in text
    modules = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add(node.module.split(".")[0])
    assert modules == {"base64", "json", "math", "importlib", "torch"}


def test_float8_is_refused_by_name():
    with pytest.raises(ConfigError) as raised:
        export_script(StepConfig(compute_dtype="float8"), framework="pytorch")
    assert raised.value.field == "compute_dtype" and "PyTorch" in str(raised.value)


@pytest.mark.parametrize(
    ("config", "field"),
    [
        (StepConfig(n=4096, d_in=64, d_out=16), "n"),
        (StepConfig(n=8, model="mlp", hidden_layers=2, hidden_width=1024), "hidden_width"),
    ],
)
def test_a_script_over_2_mb_is_refused_before_any_compute(config, field, monkeypatch):
    """Named, with the cap and what fits; the parameters are never drawn."""
    import playground.views.export_torch as export_torch

    def no_compute(*args, **kwargs):
        raise AssertionError("the parameters were drawn")

    monkeypatch.setattr(export_torch, "initial_state", no_compute)
    with pytest.raises(ConfigError) as raised:
        export_script(config, framework="pytorch")
    assert raised.value.field == field
    assert "2 MB" in str(raised.value) and "300,000" in str(raised.value)


def test_the_largest_accepted_script_is_under_2_mb():
    """N x (D_in + D_out) + parameters just under the cap: the script is under 2 MB."""
    config = StepConfig(n=3500, d_in=64, d_out=16, steps=1)  # 280,000 + 1,040 values
    assert len(export_script(config, framework="pytorch").encode()) < MAX_SCRIPT_BYTES
