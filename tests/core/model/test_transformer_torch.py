"""The transformer block against PyTorch: the same block written here in torch, as a PyTorch user
writes it (``F.linear``, ``F.scaled_dot_product_attention(q, k, v, is_causal=True)`` on
(sequences, heads, T, d_head), ``F.layer_norm``, ``F.silu(g) * u``, ``F.mse_loss``), from the
page's starting parameters and batch, gives the page's float32 loss and gradients within 1e-5
relative, and under ``torch.autocast(device_type="cpu")`` the page's ``autocast`` step (loss,
gradients and the loss after an SGD step) within the dtype's precision, for bfloat16 and float16.

Nothing here reads the playground's code for the block: only its parameters, its batch and its
step (``traced_step``). The shapes are tiny, and N is not a multiple of seq_len in one case, so
the last sequence is short (torch pads it here, and the page pads it its own way).
"""

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
from playground.core.model.optimizers import build_optimizer  # noqa: E402
from playground.core.settings.settings import StepConfig  # noqa: E402
from playground.core.step.policy import FLOAT32_TWIN, Policy  # noqa: E402

pytestmark = pytest.mark.slow

LOW = {"bfloat16": torch.bfloat16, "float16": torch.float16}
LR = 0.01  # small enough that no case diverges in its one step (a large step amplifies rounding)
# Two sequences and a short third (N = 10, T = 4) with layer norms; three whole ones without.
CONFIGS = {
    "layernorm-short-last": StepConfig(
        model="transformer",
        n=10,
        d_in=3,
        d_out=2,
        hidden_width=8,
        heads=2,
        seq_len=4,
        norm="layernorm",
        input_scale=2.0,
        lr=LR,
    ),
    "no-norm": StepConfig(
        model="transformer",
        model_seed=3,
        data_seed=5,
        n=12,
        d_in=4,
        d_out=3,
        hidden_width=12,
        heads=3,
        seq_len=4,
        lr=LR,
    ),
}


def torch_block(leaves: dict, x: torch.Tensor, config: StepConfig) -> torch.Tensor:
    """The block's output for x (rows, d_in), written in torch from the spec: parameters under
    the page's names, kernels (in, out) as flax stores them."""

    def linear(name, t):
        return F.linear(t, leaves[f"{name}.kernel"].T, leaves[f"{name}.bias"])

    def norm(index, t):
        if config.norm != "layernorm":
            return t
        scale, bias = leaves[f"norms.{index}.scale"], leaves[f"norms.{index}.bias"]
        return F.layer_norm(t, (t.shape[-1],), scale, bias, eps=1e-6)  # flax's epsilon

    rows, d = x.shape[0], config.hidden_width
    heads, seq_len = config.heads, config.seq_len
    pad = -rows % seq_len

    def split(t):  # (rows, d) -> (sequences, heads, T, d_head), zero rows after a short last
        t = F.pad(t, (0, 0, 0, pad))
        return t.reshape(-1, seq_len, heads, d // heads).transpose(1, 2)

    h = linear("embed", x)
    a = norm(0, h)
    q, k, v = (split(linear(f"attention.{name}", a)) for name in ("query", "key", "value"))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    h = h + linear("attention.out", o.transpose(1, 2).reshape(-1, d)[:rows])
    b = norm(1, h)
    m = F.silu(linear("mlp.gate", b)) * linear("mlp.up", b)
    h = h + linear("mlp.down", m)
    return linear("readout", h)


def torch_step(params: dict, x, y, config: StepConfig, low: str | None):
    """(loss, {name: gradient} float64, loss after an SGD step of LR), under autocast to
    ``low`` or in float32 (None); parameters as float32 leaves."""
    leaves = {name: torch.tensor(np.asarray(v), requires_grad=True) for name, v in params.items()}
    inputs, targets = torch.tensor(np.asarray(x)), torch.tensor(np.asarray(y))

    def loss_of(leaves):
        if low is None:
            return F.mse_loss(torch_block(leaves, inputs, config), targets)
        with torch.autocast(device_type="cpu", dtype=LOW[low]):
            return F.mse_loss(torch_block(leaves, inputs, config), targets)

    loss = loss_of(leaves)
    loss.backward()
    grads = {name: leaf.grad.numpy().astype(np.float64) for name, leaf in leaves.items()}
    with torch.no_grad():
        stepped = {name: leaf - LR * leaf.grad for name, leaf in leaves.items()}
        new_loss = float(loss_of(stepped))
    return float(loss.detach()), grads, new_loss


def page_step(config: StepConfig, policy: Policy):
    """The page's step (one SGD step of LR at S = 1), compiled: its trace."""
    x, y = make_batch(config)
    model = build_model(config.model_choice, config.d_in, config.d_out, nnx.Rngs(config.model_seed))
    return traced_step(model, build_optimizer("sgd", LR), x, y, 1.0, policy), x, y


def relative(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


# Adding the key's bias adds q . b to every score of a query's row, which the softmax ignores:
# its exact gradient is zero, so what both sides hold is rounding, compared to the whole gradient.
ZERO_GRADIENT = "attention.key.bias"


def assert_gradients_close(page: dict, torch_grads: dict, bound: float) -> None:
    """Each parameter's page gradient within ``bound`` of torch's (norm-relative); the key's
    bias within ``bound`` of the whole gradient's norm, on both sides."""
    assert set(page) == set(torch_grads)
    whole = np.sqrt(sum(np.sum(np.square(g)) for g in torch_grads.values()))
    for parameter, want in torch_grads.items():
        got = np.asarray(page[parameter], np.float64)
        if parameter == ZERO_GRADIENT:
            assert max(np.linalg.norm(got), np.linalg.norm(want)) <= bound * whole, parameter
        else:
            assert relative(got, want) <= bound, (parameter, relative(got, want))


@pytest.mark.parametrize("name", list(CONFIGS))
def test_float32_loss_and_gradients_are_torch_s(name):
    config = CONFIGS[name]
    trace, x, y = page_step(config, FLOAT32_TWIN)
    loss, grads, new_loss = torch_step(trace.params_before, x, y, config, None)
    expected = {"embed.kernel", "attention.query.kernel", "mlp.gate.bias", "readout.kernel"}
    if config.norm == "layernorm":
        expected |= {"norms.0.scale", "norms.1.bias"}
    assert expected <= set(grads) == set(trace.grads)
    assert relative(trace.initial_loss[0], loss) <= 1e-5
    assert relative(trace.new_loss[0], new_loss) <= 1e-5
    assert_gradients_close(trace.grads, grads, 1e-5)


@pytest.mark.parametrize("low", list(LOW))
@pytest.mark.parametrize("name", list(CONFIGS))
def test_the_autocast_step_is_torch_autocast_s_within_the_dtype(name, low):
    """The page's ``autocast`` preset: the linears low, attention (scores, softmax, values),
    the layer norms and the loss in float32, as torch's CPU autocast computes them. The loss
    is float32 of outputs rounded to the low dtype: a few of its ulps; the gradients within 8."""
    config = CONFIGS[name]
    trace, x, y = page_step(config, Policy.of(low, precision_policy="autocast"))
    loss, grads, new_loss = torch_step(trace.params_before, x, y, config, low)
    eps = float(jnp.finfo(jnp.dtype(low)).eps)
    assert relative(trace.initial_loss[0], loss) <= 4 * eps
    assert relative(trace.new_loss[0], new_loss) <= 4 * eps
    assert_gradients_close(trace.grads, grads, 8 * eps)


def test_the_torch_block_is_causal_and_sequence_local():
    """The peer itself: a token's output depends on no later token and no other sequence (so the
    comparisons above are of a causal block over sequences of seq_len rows)."""
    config = CONFIGS["layernorm-short-last"]
    trace, x, _ = page_step(config, FLOAT32_TWIN)
    leaves = {name: torch.tensor(np.asarray(v)) for name, v in trace.params_before.items()}
    inputs = torch.tensor(np.asarray(x))
    changed = inputs.clone()
    changed[5] += 1.0  # token 1 of the second sequence
    before, after = torch_block(leaves, inputs, config), torch_block(leaves, changed, config)
    moved = (before - after).abs().amax(dim=1) > 0
    assert moved.tolist() == [False] * 5 + [True] * 3 + [False] * 2
