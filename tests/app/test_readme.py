"""The README's promises: Space front matter, the two set-up commands, CI running the test one."""

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


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


def test_two_commands_run_the_app_and_the_tests_and_ci_runs_the_same_test_command():
    run_app, run_tests = bash_blocks()[:2]
    assert run_app == "pip install -r requirements.txt && python app.py"
    assert run_tests.startswith("pip install -r requirements-dev.txt && ")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert run_tests in ci, ".ci/run must run the README's test command verbatim"


def test_dev_requirements_include_the_runtime_pins():
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()
    assert {"jax", "flax", "optax", "gradio", "plotly", "numpy"} <= set(pins("requirements.txt"))


def test_the_client_example_works_as_written(app_url, capsys):
    from playground import StepConfig, run_report

    blocks = re.findall(r"```python\n(.*?)\n```", README, re.DOTALL)
    example = next(block for block in blocks if "gradio_client" in block)
    assert 'Client("http://127.0.0.1:7860/")' in example
    exec(example.replace("http://127.0.0.1:7860/", app_url), {})
    # The client first announces itself ("Loaded as API: ..."); the example's prints come last.
    printed = " ".join(capsys.readouterr().out.splitlines()[-2:]).split()
    report = run_report(StepConfig(n=32, d_in=8, d_out=4, lr=0.1, loss_scale=1024.0))
    assert float(printed[0]) == report.mixed_new_loss
    assert float(printed[1]) == report.float32_new_loss
    assert int(printed[2]) == report.kernel.underflow_count


def test_the_package_example_runs():
    blocks = re.findall(r"```python\n(.*?)\n```", README, re.DOTALL)
    example = next(block for block in blocks if "mixed_precision_step(0, x, y" in block)
    namespace: dict = {}
    exec(example, namespace)
    assert namespace["report"].config.n == 32


def test_readme_precision_claims_hold_on_this_backend():
    """Each sentence about precision in 'What you can learn' is computed here, independently."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from playground import StepConfig, run_report
    from playground.core.settings import settings

    # float16: a value at or below 2^-25 (about 2.98e-8) rounds to zero, one just above does not.
    assert "2^-25 (about 2.98e-8" in README
    assert float("2.98e-8") == np.float64(2.0**-25).round(10)
    assert np.float16(2.0**-25) == 0 and np.float16(np.nextafter(2.0**-25, 1.0)) > 0
    # Tiny data at S = 1 loses most entries; 2^15 brings them back; 2^16 gives inf and NaN.
    tiny = StepConfig(
        compute_dtype="float16", input_scale=2.0**-12, target_scale=2.0**-12, loss_scale=1.0
    )
    assert "Scale the loss by 2^15 and they come back" in README
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
    # NaN, no inf (the default batch's counts: tests/core/test_lessons.py).
    assert "come out as\n  NaN" in README and np.isnan(scaled).all()

    # float16 subnormals survive a compiled product here; float32 and bfloat16 ones do not.
    def product(dtype):
        tiny_value = jnp.asarray(jnp.finfo(dtype).smallest_subnormal, dtype)
        return float(jax.jit(lambda a, b: a * b)(tiny_value, jnp.ones((), dtype)))

    if jax.default_backend() == "cpu":
        assert product(jnp.float16) > 0 and product(jnp.float32) == 0 == product(jnp.bfloat16)
    # The loss scale's range is [2^-126, 2^126].
    bounds = settings()["loss_scale"]
    assert "[2^-126, 2^126]" in README and (bounds.low, bounds.high) == (2.0**-126, 2.0**126)
