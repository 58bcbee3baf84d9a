"""A real model's gradients: the page's own two lines (from PyTorch after one ``backward()`` in
torch 2.13, and from JAX) write the file, and the analysis counts float16's flushed entries of
each gradient exactly as ml_dtypes does."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch

from playground.core.tensors.report import analyse_file
from playground.sections.tensors.tab import SAVE_JAX, SAVE_TORCH

pytestmark = pytest.mark.slow


def analysed(path):
    with open(path, "rb") as file:
        return analyse_file(file, path.stat().st_size, path.name)


def zero_share(values: np.ndarray, kind) -> float | None:
    """The share of the finite nonzero entries whose ml_dtypes cast to ``kind`` is 0."""
    live = values[(values != 0) & np.isfinite(values)]
    return float(np.count_nonzero(live.astype(kind) == 0)) / live.size if live.size else None


def test_torch_gradients_after_backward_saved_by_the_pages_lines(tmp_path, monkeypatch):
    torch.manual_seed(35)
    model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.GELU(), torch.nn.Linear(24, 3))
    inputs, targets = torch.randn(32, 12), torch.randn(32, 3)
    # A loss this small (as before loss scaling) leaves gradients near float16's subnormals.
    loss = torch.nn.functional.mse_loss(model(inputs), targets) * 2.0**-24
    monkeypatch.chdir(tmp_path)
    exec(SAVE_TORCH, {"model": model, "loss": loss})
    report = analysed(tmp_path / "grads.safetensors")
    parameters = dict(model.named_parameters())
    assert {t.name for t in report.tensors} == set(parameters)
    shares = []
    for tensor in report.tensors:
        gradient = parameters[tensor.name].grad.numpy()
        assert (tensor.dtype, tensor.shape) == ("F32", tuple(gradient.shape))
        expected = zero_share(gradient, np.float16)
        assert tensor.formats["float16"].zero == expected, tensor.name
        shares.append(expected)
    assert max(shares) > 0.05  # the case the page is for: float16 flushes these gradients


def test_jax_gradients_saved_by_the_pages_lines(tmp_path, monkeypatch):
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    params = {"layers": [{"w": jnp.ones((4, 3)), "b": jnp.zeros(3)}], "scale": jnp.float32(2)}

    def loss_fn(p):
        out = jnp.ones((2, 4)) @ p["layers"][0]["w"] + p["layers"][0]["b"]
        return jnp.mean(out**2) * p["scale"] * 1e-9

    monkeypatch.chdir(tmp_path)
    exec(SAVE_JAX, {"jax": jax, "np": np, "loss_fn": loss_fn, "params": params})
    report = analysed(tmp_path / "grads.safetensors")
    grads = jax.grad(loss_fn)(params)
    expected = {"layers.0.w": grads["layers"][0]["w"], "layers.0.b": grads["layers"][0]["b"]}
    expected["scale"] = grads["scale"]
    assert {t.name: t.shape for t in report.tensors} == {k: v.shape for k, v in expected.items()}
    for tensor in report.tensors:
        values = np.asarray(expected[tensor.name])
        assert tensor.formats["float16"].zero == zero_share(values, np.float16)
        assert tensor.formats["bfloat16"].zero == zero_share(values, ml_dtypes.bfloat16)
