"""The playground's mixed-precision step and training run, written for PyTorch.

Exported from the mixed-precision playground. From the page's starting parameters and
batch (embedded below: PyTorch cannot draw JAX's random numbers), it runs

  mixed_precision_step  one step, float32 weights, torch.autocast(COMPUTE_DTYPE) and a
                        torch.amp.GradScaler holding the loss scale fixed;
  float32_step          the same step in float32, without autocast or a scaler;
  train                 STEPS steps of a float32 run and a mixed run (autocast, and
                        GradScaler by MODE), from the same start,

with the settings below (the page's fields, in capitals). The model is the page's:
nn.Linear, a MultiLayer of nn.Linear layers, or a Transformer block (nn.Linear layers,
torch.nn.functional.scaled_dot_product_attention with a causal mask, nn.LayerNorm, a
SwiGLU MLP), its parameters under the page's names.

What differs from the page: autocast rounds where PyTorch's op lists say (nn.Linear in
COMPUTE_DTYPE, mse_loss in float32), not where the exercise casts (the data, weights and
loss), so the losses agree with the page's within the dtype's precision, not bit for
bit. GradScaler has no floor and no cap on its scale (the page's dynamic scale follows
jmp: never below min(1, its start)), and it skips a step with inf or NaN gradients even
at a fixed scale, where the page's static scale applies it. The page's pure run (weights
stored in COMPUTE_DTYPE) is not here: autocast keeps the weights in float32.

The last printed line is JSON: "mixed_new", "float32_new", "final_loss" ({"float32",
"mixed"}), "skipped_steps" ({"mixed"}), "config" and "versions", as in the JAX export.
Run it with

    python mixed_precision_torch_bfloat16_seed0.py
"""

import base64
import json
import math
from importlib.metadata import version

import torch
from torch import nn

# --- settings: the playground writes the page's values here when it exports ---
MODEL_SEED = 0  # model seed
DATA_SEED = 0  # data seed
N = 8  # batch rows N
D_IN = 4  # input width D_in
D_OUT = 2  # output width D_out
LR = 0.1  # learning rate
LOSS_SCALE = 2.0**10  # loss scale
INPUT_SCALE = 1.0  # input scale
TARGET_SCALE = 1.0  # target scale
COMPUTE_DTYPE = "bfloat16"  # compute dtype
MODEL = "linear"  # model
HIDDEN_LAYERS = 2  # hidden layers
HIDDEN_WIDTH = 64  # hidden width
ACTIVATION = "relu"  # activation
OPTIMIZER = "sgd"  # optimizer
STEPS = 20  # training steps
MODE = "static"  # loss scaling
PERIOD = 100  # growth period
PURE_ROUNDING = "nearest"  # pure-run rounding
NORM = "none"  # normalisation
SEQ_LEN = 8  # sequence length
HEADS = 2  # attention heads
# --- end of settings ---

# --- data: the page's starting parameters and batch (float32, little-endian, base64)
WEIGHTS = {
    "weight": "lvsIP5jwzb7B7O6+6GTHPglA+L6Uhx6/sq6iPm3MC78=",
    "bias": "AAAAAAAAAAA=",
}
X = (
    "PQ6PP0+Nsb+YZ9q+5bdNvyv3GT8Plpm92oB0PdEYA72y7z2+BjaaPyoHRz8n3K2/cBNFPzLHXr8N"
    "xYw/kV51v/gwo79mw66/xLa8v9733T5t/6e+XJF4v/z7oT/YpnY7bISIv45M3T+UG+e+VS5HPd6x"
    "kb/HNK2+hM7Dv/D2UD4="
)
Y = (
    "uY0Vvzk0Ez1n2ge993WHvryiXr9cxKG/Qrn7vgQtor6ZRJg+eOH8P+jmNT4uWg8/AOc7vBMgyL6m"
    "v4w9YHJRPw=="
)
# --- end of data ---

DTYPE = getattr(torch, COMPUTE_DTYPE)  # autocast's dtype
ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": lambda: nn.GELU(approximate="tanh"),  # JAX's gelu: the tanh approximation
    "tanh": nn.Tanh,
}


def decoded(text):
    """A float32 tensor from its embedded base64 bytes."""
    return torch.frombuffer(bytearray(base64.b64decode(text)), dtype=torch.float32)


def make_batch():
    """The page's batch x (N x D_IN) and y (N x D_OUT), exactly."""
    return decoded(X).reshape(N, D_IN), decoded(Y).reshape(N, D_OUT)


def make_norm(width):
    """NORM's normalisation of a width: nn.LayerNorm with flax's epsilon, or none."""
    return nn.LayerNorm(width, eps=1e-6) if NORM == "layernorm" else nn.Identity()


class MultiLayer(nn.Module):
    """nn.Linear layers D_IN -> HIDDEN_WIDTH ... -> D_OUT with ACTIVATION between them,
    each hidden layer's output normalised by NORM before its activation."""

    def __init__(self):
        super().__init__()
        widths = [D_IN, *[HIDDEN_WIDTH] * HIDDEN_LAYERS, D_OUT]
        pairs = zip(widths[:-1], widths[1:], strict=True)
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in pairs)
        self.norms = nn.ModuleList(make_norm(width) for width in widths[1:-1])
        self.activation = ACTIVATIONS[ACTIVATION]()

    def forward(self, x):
        for layer, norm in zip(self.layers[:-1], self.norms, strict=True):
            x = self.activation(norm(layer(x)))
        return self.layers[-1](x)  # no activation after the last layer


class Attention(nn.Module):
    """Causal multi-head self-attention within sequences of SEQ_LEN consecutive rows."""

    def __init__(self, width):
        super().__init__()
        self.query, self.key = nn.Linear(width, width), nn.Linear(width, width)
        self.value, self.out = nn.Linear(width, width), nn.Linear(width, width)

    def forward(self, a):
        rows, width = a.shape
        # A last short sequence is padded with zero rows; with the causal mask no real
        # token sees them, and they are dropped again before the output layer.
        pad = -rows % SEQ_LEN

        def split(t):  # (rows, width) -> (sequences, HEADS, SEQ_LEN, width / HEADS)
            t = nn.functional.pad(t, (0, 0, 0, pad))
            return t.reshape(-1, SEQ_LEN, HEADS, width // HEADS).transpose(1, 2)

        q, k, v = split(self.query(a)), split(self.key(a)), split(self.value(a))
        # softmax(q k^T / sqrt(d_head)) v, each query seeing its own and earlier tokens.
        o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(o.transpose(1, 2).reshape(-1, width)[:rows])


class SwiGLU(nn.Module):
    """The gated MLP: down(silu(gate(b)) * up(b)), gated width 2 x HIDDEN_WIDTH."""

    def __init__(self, width):
        super().__init__()
        self.gate, self.up = nn.Linear(width, 2 * width), nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, b):
        return self.down(nn.functional.silu(self.gate(b)) * self.up(b))


class Transformer(nn.Module):
    """One pre-norm block on tokens of D_IN features: embed, attention and SwiGLU, each
    added to the residual stream after NORM, then a linear read-out to D_OUT."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(D_IN, HIDDEN_WIDTH)
        self.attention = Attention(HIDDEN_WIDTH)
        self.mlp = SwiGLU(HIDDEN_WIDTH)
        self.readout = nn.Linear(HIDDEN_WIDTH, D_OUT)
        self.norms = nn.ModuleList(make_norm(HIDDEN_WIDTH) for _ in range(2))

    def forward(self, x):
        h = self.embed(x)
        h = h + self.attention(self.norms[0](h))
        h = h + self.mlp(self.norms[1](h))
        return self.readout(h)


def build_model():
    """The page's model with its starting parameters: nn.Linear(D_IN, D_OUT), the
    MultiLayer or the Transformer, its parameters named as the page names them."""
    if MODEL not in ("linear", "mlp", "transformer"):
        built = "linear, mlp or transformer"
        raise ValueError(f"this script builds MODEL {built}; got {MODEL!r}")
    models = {"mlp": MultiLayer, "transformer": Transformer}
    model = models[MODEL]() if MODEL in models else nn.Linear(D_IN, D_OUT)
    shapes = {name: value.shape for name, value in model.state_dict().items()}
    # JAX's kernel is nn.Linear's weight transposed; the export wrote it as a weight.
    start = {name: decoded(b64).reshape(shapes[name]) for name, b64 in WEIGHTS.items()}
    model.load_state_dict(start)
    return model


def make_optimizer(model):
    """The page's optimizer (sgd, momentum or adam) over the float32 parameters."""
    if OPTIMIZER not in ("sgd", "momentum", "adam"):
        raise ValueError(f"this script builds sgd, momentum, adam; got {OPTIMIZER!r}")
    if OPTIMIZER == "adam":
        return torch.optim.Adam(model.parameters(), lr=LR)  # optax.adam's defaults
    momentum = 0.9 if OPTIMIZER == "momentum" else 0.0
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)


def make_scaler(mode):
    """The loss scale S of the page's MODE: none: off (S = 1); static: init_scale, put
    back by update(new_scale=...) each step; dynamic: doubled after PERIOD finite steps
    (growth_interval is the page's period), halved on inf or NaN gradients."""
    return torch.amp.GradScaler(
        "cpu",
        init_scale=LOSS_SCALE,
        growth_factor=2.0,
        backoff_factor=0.5,
        growth_interval=PERIOD,
        enabled=mode != "none",
    )


def mixed_step(model, optimizer, scaler, x, y, mode):
    """One training step under autocast; returns True when GradScaler skipped it."""
    optimizer.zero_grad()
    # The compute dtype: autocast runs each nn.Linear in DTYPE, mse_loss in float32.
    with torch.autocast(device_type="cpu", dtype=DTYPE):
        loss = nn.functional.mse_loss(model(x), y)
    # The loss scale: backward() of loss * S carries gradients S times larger.
    scaler.scale(loss).backward()
    # Unscale the float32 gradients before the update (the page: scaled_grads / S).
    scaler.unscale_(optimizer)
    finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
    # The update of the float32 "master" weights; GradScaler skips it on inf or NaN.
    scaler.step(optimizer)
    # A static scale stays at LOSS_SCALE; a dynamic one grows or backs off.
    scaler.update(LOSS_SCALE if mode == "static" else None)
    return scaler.is_enabled() and not finite


def float32_loss(model, x, y):
    """The float32 MSE of `model` (the page's training curves), without autocast."""
    with torch.no_grad():
        return nn.functional.mse_loss(model(x), y).item()


def mixed_precision_step(x, y):
    """One step at the fixed loss scale; the loss after it, computed under autocast."""
    model = build_model()
    mixed_step(model, make_optimizer(model), make_scaler("static"), x, y, "static")
    with torch.no_grad(), torch.autocast(device_type="cpu", dtype=DTYPE):
        return nn.functional.mse_loss(model(x), y).item()


def float32_step(x, y):
    """The float32 twin: the same step without autocast and without a loss scale."""
    model = build_model()
    optimizer = make_optimizer(model)
    nn.functional.mse_loss(model(x), y).backward()
    optimizer.step()
    return float32_loss(model, x, y)


def train(x, y):
    """STEPS steps of the float32 run and the mixed run (MODE): their float32 losses
    after the last step, and the mixed run's skipped steps."""
    float32_model, mixed_model = build_model(), build_model()
    float32_optimizer = make_optimizer(float32_model)
    optimizer, scaler = make_optimizer(mixed_model), make_scaler(MODE)
    skipped = 0
    for _ in range(STEPS):
        float32_optimizer.zero_grad()
        nn.functional.mse_loss(float32_model(x), y).backward()
        float32_optimizer.step()
        skipped += mixed_step(mixed_model, optimizer, scaler, x, y, MODE)
    final = {"float32": float32_loss(float32_model, x, y)}
    final["mixed"] = float32_loss(mixed_model, x, y)
    return final, skipped


def json_number(value):
    """A float for strict JSON: non-finite values become "nan", "inf" or "-inf"."""
    return value if math.isfinite(value) else str(value)


def main():
    x, y = make_batch()
    mixed_new, float32_new = mixed_precision_step(x, y), float32_step(x, y)
    print(f"after the step: {COMPUTE_DTYPE} {mixed_new!r}, float32 {float32_new!r}")
    final, skipped = train(x, y)
    print(f"after {STEPS} steps: {final}, skipped: {skipped}")
    names = "model_seed data_seed n d_in d_out lr loss_scale input_scale target_scale"
    names += " compute_dtype model hidden_layers hidden_width activation optimizer"
    names += " steps mode period pure_rounding norm seq_len heads"
    config = {name: globals()[name.upper()] for name in names.split()}
    summary = {
        "mixed_new": json_number(mixed_new),
        "float32_new": json_number(float32_new),
        "final_loss": {name: json_number(loss) for name, loss in final.items()},
        "skipped_steps": {"mixed": skipped},
        "config": config,
        "versions": {"torch": version("torch")},
    }
    print(json.dumps(summary, allow_nan=False))


if __name__ == "__main__":
    main()
