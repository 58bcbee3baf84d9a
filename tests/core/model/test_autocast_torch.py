"""The autocast preset against PyTorch itself: the op lists it names are the installed torch's
(probed through its CPU autocast), and the same model, parameters and batch under
``torch.autocast(device_type="cpu")`` give the same losses and gradients within the dtype."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

torch = pytest.importorskip("torch")
F = torch.nn.functional

from traced_step import traced_step  # noqa: E402

from playground.core.data.synthetic import make_batch  # noqa: E402
from playground.core.model.models import build_model  # noqa: E402
from playground.core.model.op_policy import TORCH_AUTOCAST, TORCH_VERSION  # noqa: E402
from playground.core.model.optimizers import build_optimizer  # noqa: E402
from playground.core.settings.settings import StepConfig  # noqa: E402
from playground.core.step.policy import Policy  # noqa: E402

pytestmark = pytest.mark.slow

LOW = {"bfloat16": torch.bfloat16, "float16": torch.float16}
WEIGHT = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
CALLS = {
    "linear": lambda t: F.linear(t, WEIGHT.to(t.dtype)),
    "matmul": lambda t: t @ WEIGHT.T.to(t.dtype),
    "mse_loss": lambda t: F.mse_loss(t, torch.zeros_like(t)),
    "cross_entropy": lambda t: F.cross_entropy(t, torch.zeros(t.shape[0], dtype=torch.long)),
    "layer_norm": lambda t: F.layer_norm(t, (t.shape[-1],)),
    "softmax": lambda t: torch.softmax(t, -1),
    "log_softmax": lambda t: torch.log_softmax(t, -1),
    "relu": torch.relu,
    "gelu": lambda t: F.gelu(t, approximate="tanh"),
    "tanh": torch.tanh,
    "scaled_dot_product_attention": lambda t: F.scaled_dot_product_attention(t, t, t),
}


def test_the_installed_torch_is_the_version_the_preset_names():
    assert torch.__version__.split("+")[0] == TORCH_VERSION


@pytest.mark.parametrize("low", list(LOW))
def test_the_op_lists_are_torchs_cpu_autocast_lists(low):
    dtype = LOW[low]
    inputs = torch.randn(4, 8, generator=torch.Generator().manual_seed(1))
    named = [name for names in TORCH_AUTOCAST.values() for name in names]
    assert sorted(named) == sorted(CALLS)
    with torch.autocast(device_type="cpu", dtype=dtype):
        # The lower-precision list casts float32 inputs down; the float32 list casts low inputs
        # up; an op on neither list computes in its input's dtype.
        for name in TORCH_AUTOCAST["lower_precision"]:
            assert CALLS[name](inputs).dtype == dtype, name
        for name in TORCH_AUTOCAST["float32"]:
            assert CALLS[name](inputs.to(dtype)).dtype == torch.float32, name
        for name in TORCH_AUTOCAST["neither"]:
            assert CALLS[name](inputs.to(dtype)).dtype == dtype, name
        normed = F.layer_norm(inputs.to(dtype) * 40, (8,))
    # layer_norm on no list still computes in float32 inside: its output is the float32 norm
    # rounded once.
    expected = F.layer_norm((inputs.to(dtype) * 40).float(), (8,)).to(dtype)
    assert torch.equal(normed, expected)


@pytest.mark.parametrize("low", list(LOW))
def test_sdpa_computes_its_scores_and_softmax_in_float32_inside(low):
    """What the attention kind copies: sdpa takes and returns the low dtype under CPU autocast
    (its lower-precision list), but its kernel's scores and softmax are float32."""
    dtype, eps = LOW[low], torch.finfo(LOW[low]).eps
    generator = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(2, 2, 8, 16, generator=generator) * 3 for _ in range(3))
    q, k, v = q.to(dtype), k.to(dtype), v.to(dtype)
    with torch.autocast(device_type="cpu", dtype=dtype):
        fused = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert fused.dtype == dtype
    exact = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=True)
    # The fused output's error is its one rounding (at most eps / 2 of each entry, in norm);
    # the same three steps computed in the low dtype err more.
    error = float((fused.float() - exact).norm() / exact.norm())
    assert error <= eps / 2
    causal = torch.ones(8, 8, dtype=torch.bool).tril()
    scores = (q / 4) @ k.transpose(-1, -2)
    weights = torch.softmax(scores.masked_fill(~causal, float("-inf")), -1)
    stepwise = float(((weights @ v).float() - exact).norm() / exact.norm())
    assert stepwise > error
    # Scaled dot products past float16's 65504: the fused kernel stays finite, the low scores
    # do not.
    big = torch.full((1, 1, 4, 16), 200.0).to(torch.float16)  # q . k / 4 = 160000
    with torch.autocast(device_type="cpu", dtype=torch.float16):
        out = F.scaled_dot_product_attention(big, big, big, is_causal=True)
    assert torch.isfinite(out).all() and out.dtype == torch.float16
    assert torch.isinf((big / 4) @ big.transpose(-1, -2)).all()


def _torch_step(params, x, y, low, task, hidden, activation):
    """Loss and gradients of the MLP under torch.autocast, parameters float32 leaves."""
    leaves = {name: torch.tensor(np.asarray(v), requires_grad=True) for name, v in params.items()}
    inputs = torch.tensor(x)
    with torch.autocast(device_type="cpu", dtype=LOW[low]):
        for index in range(hidden):
            kernel, bias = leaves[f"layers.{index}.kernel"], leaves[f"layers.{index}.bias"]
            z = F.linear(inputs, kernel.T, bias)
            scale, shift = leaves[f"norms.{index}.scale"], leaves[f"norms.{index}.bias"]
            z = F.layer_norm(z, (z.shape[-1],), scale, shift, eps=1e-6)
            inputs = activation(z)
        last = f"layers.{hidden}"
        outputs = F.linear(inputs, leaves[f"{last}.kernel"].T, leaves[f"{last}.bias"])
        if task == "classification":
            loss = F.cross_entropy(outputs, torch.tensor(y).argmax(-1))
        else:
            loss = F.mse_loss(outputs, torch.tensor(y))
    loss.backward()
    grads = {name: leaf.grad.numpy().astype(np.float64) for name, leaf in leaves.items()}
    return float(loss), grads


@pytest.mark.parametrize(
    "low, task, activation",
    [
        ("bfloat16", "regression", "tanh"),
        ("bfloat16", "classification", "gelu"),
        ("float16", "classification", "tanh"),
    ],
)
def test_autocast_gives_torch_autocasts_losses_and_gradients(low, task, activation):
    config = StepConfig(
        n=64,
        d_in=16,
        d_out=5,
        model="mlp",
        hidden_layers=2,
        hidden_width=32,
        activation=activation,
        norm="layernorm",
        task=task,
        input_scale=3.0,
    )
    x, y = make_batch(config)
    model = build_model(config.model_choice, config.d_in, config.d_out, nnx.Rngs(2))
    policy = Policy.of(low, precision_policy="autocast", task=task)
    trace = traced_step(model, build_optimizer("sgd", 0.1), x, y, 1.0, policy)
    params = {name: np.asarray(value) for name, value in trace.params_before.items()}
    loss, grads = _torch_step(params, x, y, low, task, 2, CALLS[activation])
    eps = float(jnp.finfo(jnp.dtype(low)).eps)
    # The loss is float32 in both, of outputs rounded to the low dtype: a few of its ulps.
    assert float(trace.initial_loss[0]) == pytest.approx(loss, rel=4 * eps)
    assert set(grads) == set(trace.grads)
    for name, want in grads.items():
        got = np.asarray(trace.grads[name], np.float64)
        error = np.linalg.norm(got - want) / np.linalg.norm(want)
        assert error <= 8 * eps, (name, error)
