"""The GPU install path pins the same JAX as the runtime, with a CUDA plugin of that version."""

from __future__ import annotations

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[1]


def pins(name: str) -> dict[str, str]:
    text = (ROOT / name).read_text()
    return dict(re.findall(r"^([A-Za-z0-9_.\[\]-]+)==(\S+)$", text, flags=re.MULTILINE))


def test_the_cuda_requirements_add_jaxs_cuda_plugin_at_the_runtime_jax_version():
    runtime, cuda = pins("requirements.txt"), pins("requirements-cuda.txt")
    assert "-r requirements.txt" in (ROOT / "requirements-cuda.txt").read_text()
    plugins = {name: version for name, version in cuda.items() if name.startswith("jax[cuda")}
    assert plugins == {"jax[cuda12]": runtime["jax"]}, plugins
    assert runtime["jaxlib"] == runtime["jax"]  # the plugin requires the same jaxlib
