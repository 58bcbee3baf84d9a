"""The playground's mixed-precision step and training run, written for PyTorch.

The batch and flax's starting parameters are drawn again from the seeds (numpy's PCG64;
JAX's PRNG in numpy). mixed_precision_step: one step, float32 weights, the pass in
COMPUTE_DTYPE, loss scale S; float32_step; train: STEPS steps, float32 and mixed runs.

bfloat16, float16: torch.autocast, the page's precision_policy "autocast" ("exercise"
casts more: the losses agree within the dtype's precision). float8: Float8Linear, scaled
casts (PyTorch on CPU has no float8 matmul). torch.amp.GradScaler is for float16
(it skips a non-finite step even at a fixed S; the page applies it); bfloat16 has
float32's range and float8 scales its gradients: S is a plain multiply and divide there
(LossScale; at S = 1 leave it out). The last line printed is JSON. Run it with

    python mixed_precision_torch_bfloat16_seed0.py
"""

import base64
import functools
import json
import math
from importlib.metadata import version

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

# --- settings: the playground writes the page's values here when it exports ---
MODEL_SEED = 0  # model seed
DATA_SEED = 0  # data seed
N = 256  # batch rows N
D_IN = 64  # input width D_in
D_OUT = 16  # output width D_out
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
STEPS = 200  # training steps
MODE = "static"  # loss scaling
PERIOD = 100  # growth period
PURE_ROUNDING = "nearest"  # pure-run rounding
NORM = "none"  # normalisation
SEQ_LEN = 8  # sequence length
HEADS = 2  # attention heads
PRECISION_POLICY = "exercise"  # precision per operation
TASK = "regression"  # task
OUTLIER_SHARE = 0.0  # outlier share
OUTLIER_SCALE = 2.0**16  # outlier scale
FP8_SCALING = "current"  # float8 scaling
AMAX_HISTORY = 16  # amax history

NOISE_STD = 0.1  # of the noise added to the teacher's targets
DATA = None  # an uploaded batch (float32, little-endian, base64), or None
# --- end of settings ---

FLOAT8 = COMPUTE_DTYPE == "float8"
DTYPE = None if FLOAT8 else getattr(torch, COMPUTE_DTYPE)  # autocast's dtype
ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": lambda: nn.GELU(approximate="tanh"),  # JAX's gelu: the tanh approximation
    "tanh": nn.Tanh,
}
# cross_entropy takes y's one-hot rows as class probabilities
LOSS = {"regression": F.mse_loss, "classification": F.cross_entropy}[TASK]
f32 = np.float32


# --- the batch: numpy's PCG64 from DATA_SEED, in the page's order of operations ---
def make_batch():
    """x = INPUT_SCALE z, y = TARGET_SCALE (c @ T + e) (classification: one-hot
    argmax), c = z or the transformer's running mean; OUTLIER_SHARE of x outliers."""
    if DATA is not None:
        x, y = (np.frombuffer(base64.b64decode(DATA[k]), "<f4") for k in "xy")
        return torch.tensor(x.reshape(N, D_IN)), torch.tensor(y.reshape(N, D_OUT))
    rng = np.random.default_rng(DATA_SEED)
    z = rng.standard_normal((N, D_IN), dtype=f32)
    teacher = rng.standard_normal((D_IN, D_OUT), dtype=f32)
    teacher /= f32(np.sqrt(D_IN))
    noise = rng.standard_normal((N, D_OUT), dtype=f32)
    noise *= f32(NOISE_STD)
    seen = z
    if MODEL == "transformer":  # in float64, rounded once
        rows = np.zeros((-(-N // SEQ_LEN) * SEQ_LEN, D_IN))
        rows[:N] = z
        sums = np.cumsum(rows.reshape(-1, SEQ_LEN, D_IN), axis=1)
        means = sums / np.arange(1, SEQ_LEN + 1)[None, :, None]
        seen = means.reshape(-1, D_IN)[:N].astype(f32)
    x = f32(INPUT_SCALE) * z
    if TASK == "classification":
        labels = np.argmax(seen @ teacher + noise, axis=-1)
        y = (labels[:, None] == np.arange(D_OUT)).astype(f32)
    else:
        y = f32(TARGET_SCALE) * (seen @ teacher + noise)
    if OUTLIER_SHARE > 0:
        count = max(1, round(OUTLIER_SHARE * x.size))
        chosen = np.random.default_rng(DATA_SEED).choice(x.size, count, replace=False)
        x.reshape(-1)[chosen] *= f32(OUTLIER_SCALE)
    return torch.from_numpy(x), torch.from_numpy(y)


# --- the starting parameters: flax's initializers and JAX's PRNG, in numpy ---
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


def threefry2x32(key, x0, x1):
    """Threefry-2x32, JAX's default PRNG."""
    ks = (key[0], key[1], key[0] ^ key[1] ^ np.uint32(0x1BD11BDA))
    x0, x1 = x0 + ks[0], x1 + ks[1]
    for i in range(5):
        for r in ROTATIONS[i % 2]:
            x0 = x0 + x1
            x1 = x0 ^ ((x1 << np.uint32(r)) | (x1 >> np.uint32(32 - r)))
        x0, x1 = x0 + ks[(i + 1) % 3], x1 + ks[(i + 2) % 3] + np.uint32(i + 1)
    return x0, x1


def fold_in(key, data):
    """jax.random.fold_in: threefry2x32(key, (0, data))."""
    words = threefry2x32(key, np.zeros(1, np.uint32), np.full(1, data, np.uint32))
    return np.concatenate(words)


def random_bits(key, shape):
    """jax.random.bits (jax_threefry_partitionable): entry i hashes the counter i."""
    count = np.arange(math.prod(shape), dtype=np.uint64)
    x0, x1 = threefry2x32(key, (count >> 32).astype(np.uint32), count.astype(np.uint32))
    return (x0 ^ x1).reshape(shape)


def fma(a, b, c):
    """a * b + c rounded once, as XLA fuses it (float64 holds a * b exactly)."""
    return (np.asarray(a, np.float64) * b + c).astype(f32)


# XLA's float32 erf_inv (M. Giles): coefficients for w < 5 and w >= 5.
ERFINV = (
    (2.81022636e-08, -0.000200214257),
    (3.43273939e-07, 0.000100950558),
    (-3.5233877e-06, 0.00134934322),
    (-4.39150654e-06, -0.00367342844),
    (0.00021858087, 0.00573950773),
    (-0.00125372503, -0.0076224613),
    (-0.00417768164, 0.00943887047),
    (0.246640727, 1.00167406),
    (1.50140941, 2.83297682),
)


def erfinv(u):
    """jax.lax.erf_inv: u times a polynomial in w = -log1p(-u^2)."""
    w = -np.log1p(-u * u)
    small = w < 5
    w = np.where(small, w - f32(2.5), np.sqrt(w) - f32(3))
    p = np.zeros_like(w)
    for low, high in ERFINV:
        p = fma(p, w, np.where(small, f32(low), f32(high)))
    return p * u


def lecun_normal(key, fan_in, fan_out):
    """flax's lecun_normal: truncated_normal(-2, 2) * sqrt(1 / fan_in) / 0.8796, bit for
    bit but where numpy's log1p and XLA's part (1 entry in 150: a few ulp off)."""
    sqrt2 = f32(math.sqrt(2))
    lower, upper = (f32(math.erf(f32(bound) / sqrt2)) for bound in (-2, 2))
    bits = random_bits(key, (fan_in, fan_out))
    # jax.random.uniform: 23 random bits as the mantissa of [1, 2), minus 1.
    floats = ((bits >> np.uint32(9)) | f32(1).view(np.uint32)).view(f32) - f32(1)
    u = np.maximum(lower, fma(floats, upper - lower, lower))
    edge = np.nextafter(f32(2), f32(0))
    normal = np.clip(sqrt2 * erfinv(u), -edge, edge)
    return normal * (np.sqrt(f32(1 / fan_in)) / f32(0.87962566103423978))


@functools.cache
def starting_state():
    """flax's draws: nnx.Rngs(MODEL_SEED)'s n-th key is fold_in((0, seed), n); each
    nnx.Linear in creation order takes one for its kernel and one for its zero bias."""
    model, key, count = make_model(nn.Linear), np.array([0, MODEL_SEED], np.uint32), 0
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            shape = layer.in_features, layer.out_features
            kernel = lecun_normal(fold_in(key, count), *shape)
            layer.weight.data, count = torch.from_numpy(kernel.T.copy()), count + 2
            layer.bias.data.zero_()
    return model.state_dict()


# --- float8: scaled casts around each nn.Linear's matmul ---
FORMATS = {"input": torch.float8_e4m3fn, "kernel": torch.float8_e4m3fn}
FORMATS["gradient"] = torch.float8_e5m2  # more range, less precision


def cast(t, fmt, scale):
    """t * scale rounded to `fmt`, in float32: beyond fmax saturates; inf, NaN stay (NaN
    in e4m3fn, which has no inf: torch's own cast would give fmax)."""
    fmax, scaled = torch.finfo(fmt).max, t * scale
    kept = scaled if fmt == torch.float8_e5m2 else torch.full_like(scaled, torch.nan)
    rounded = scaled.clamp(-fmax, fmax).to(fmt).float()
    return torch.where(scaled.isfinite(), rounded, kept)


def scale_from_amax(amax, fmt, previous):
    """fmax / amax (inf: float32's max); `previous` where amax is 0, inf or NaN."""
    ratio = torch.tensor(torch.finfo(fmt).max) / amax
    ratio = torch.where(ratio.isinf(), torch.finfo(torch.float32).max, ratio)
    return torch.where((amax > 0) & amax.isfinite(), ratio, previous)


class Float8Matmul(torch.autograd.Function):
    """x @ weight.T with per-tensor scales s:

    forward   a = e4m3(x s_x), b = e4m3(weight s_w), out = (a @ b.T) / s_x / s_w
    backward  g = e5m2(grad s_g), dx = (g @ b) / s_g / s_w, dw = (g.T @ a) / s_x / s_g
    """

    @staticmethod
    def forward(ctx, x, weight, layer):
        s_x, s_w = layer.scale("input", x), layer.scale("kernel", weight)
        a, b = cast(x, FORMATS["input"], s_x), cast(weight, FORMATS["kernel"], s_w)
        ctx.save_for_backward(a, b)
        ctx.layer, ctx.scales = layer, (s_x, s_w)
        return a @ b.T / s_x / s_w

    @staticmethod
    def backward(ctx, grad):
        (a, b), (s_x, s_w) = ctx.saved_tensors, ctx.scales
        s_g = ctx.layer.scale("gradient", grad)
        g = cast(grad, FORMATS["gradient"], s_g)
        return g @ b / s_g / s_w, g.T @ a / s_x / s_g, None


class Float8Linear(nn.Linear):
    """nn.Linear with Float8Matmul. FP8_SCALING none: scale 1; current: fmax / amax now;
    delayed: fmax / the largest amax of the last AMAX_HISTORY steps (1 at first)."""

    def __init__(self, *args):
        super().__init__(*args)
        self.amax = {}
        self.history = {role: [] for role in FORMATS}
        self.delayed = {role: torch.tensor(1.0) for role in FORMATS}

    def forward(self, x):
        return Float8Matmul.apply(x, self.weight, self) + self.bias

    def scale(self, role, t):
        self.amax[role] = t.detach().abs().max()
        if FP8_SCALING == "current":
            return scale_from_amax(self.amax[role], FORMATS[role], torch.tensor(1.0))
        return self.delayed[role] if FP8_SCALING == "delayed" else torch.tensor(1.0)

    def record(self):
        for role, amax in self.amax.items():
            self.history[role] = [amax, *self.history[role]][:AMAX_HISTORY]
            peak, previous = torch.stack(self.history[role]).max(), self.delayed[role]
            self.delayed[role] = scale_from_amax(peak, FORMATS[role], previous)


# --- the models ---
def make_norm(width):
    """NORM's normalisation of a width: nn.LayerNorm with flax's epsilon, or none."""
    return nn.LayerNorm(width, eps=1e-6) if NORM == "layernorm" else nn.Identity()


class MultiLayer(nn.Module):
    """`linear` layers D_IN -> HIDDEN_WIDTH ... -> D_OUT, NORM, ACTIVATION between."""

    def __init__(self, linear):
        super().__init__()
        widths = [D_IN, *[HIDDEN_WIDTH] * HIDDEN_LAYERS, D_OUT]
        pairs = zip(widths[:-1], widths[1:], strict=True)
        self.layers = nn.ModuleList(linear(a, b) for a, b in pairs)
        self.norms = nn.ModuleList(make_norm(width) for width in widths[1:-1])
        self.activation = ACTIVATIONS[ACTIVATION]()

    def forward(self, x):
        for layer, norm in zip(self.layers[:-1], self.norms, strict=True):
            x = self.activation(norm(layer(x)))
        return self.layers[-1](x)


class Attention(nn.Module):
    """Causal multi-head self-attention within sequences of SEQ_LEN rows."""

    def __init__(self, width, linear):
        super().__init__()
        self.query, self.key = linear(width, width), linear(width, width)
        self.value, self.out = linear(width, width), linear(width, width)

    def forward(self, a):
        rows, width = a.shape
        pad = -rows % SEQ_LEN  # zero rows after a short last sequence: none is seen

        def split(t):  # (rows, width) -> (sequences, HEADS, SEQ_LEN, width / HEADS)
            t = F.pad(t, (0, 0, 0, pad))
            return t.reshape(-1, SEQ_LEN, HEADS, width // HEADS).transpose(1, 2)

        q, k, v = split(self.query(a)), split(self.key(a)), split(self.value(a))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(o.transpose(1, 2).reshape(-1, width)[:rows])


class SwiGLU(nn.Module):
    """The gated MLP: down(silu(gate(b)) * up(b)), gated width 2 x HIDDEN_WIDTH."""

    def __init__(self, width, linear):
        super().__init__()
        self.gate, self.up = linear(width, 2 * width), linear(width, 2 * width)
        self.down = linear(2 * width, width)

    def forward(self, b):
        return self.down(F.silu(self.gate(b)) * self.up(b))


class Transformer(nn.Module):
    """One pre-norm block: embed, attention and SwiGLU (each after NORM), read-out."""

    def __init__(self, linear):
        super().__init__()
        self.embed = linear(D_IN, HIDDEN_WIDTH)
        self.attention = Attention(HIDDEN_WIDTH, linear)
        self.mlp = SwiGLU(HIDDEN_WIDTH, linear)
        self.readout = linear(HIDDEN_WIDTH, D_OUT)
        self.norms = nn.ModuleList(make_norm(HIDDEN_WIDTH) for _ in range(2))

    def forward(self, x):
        h = self.embed(x)
        h = h + self.attention(self.norms[0](h))
        h = h + self.mlp(self.norms[1](h))
        return self.readout(h)


def make_model(linear):
    """MODEL, its dense layers of class `linear`, created in flax's order."""
    if MODEL not in ("linear", "mlp", "transformer"):
        raise ValueError(f"MODEL {MODEL!r} is not built here")
    models = {"mlp": MultiLayer, "transformer": Transformer}
    return models[MODEL](linear) if MODEL in models else linear(D_IN, D_OUT)


def build_model(float8=FLOAT8):
    """The page's model and starting parameters, under the page's names."""
    model = make_model(Float8Linear if float8 else nn.Linear)
    model.load_state_dict(starting_state())
    return model


# --- the step and the run ---
def make_optimizer(model):
    """The page's optimizer, with optax's defaults."""
    if OPTIMIZER not in ("sgd", "momentum", "adam", "adamw"):
        raise ValueError(f"OPTIMIZER {OPTIMIZER!r} is not built here")
    if OPTIMIZER == "adam":
        return torch.optim.Adam(model.parameters(), lr=LR)
    if OPTIMIZER == "adamw":  # optax.adamw(lr, weight_decay=0.01)
        return torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.01)
    momentum = 0.9 if OPTIMIZER == "momentum" else 0.0
    return torch.optim.SGD(model.parameters(), lr=LR, momentum=momentum)


class LossScale:
    """The page's loss scale S, GradScaler's methods: loss * S, gradients / S. none:
    S = 1; static: S fixed, every step applied; dynamic (jmp's rule):

        finite gradients: after PERIOD in a row, S = 2 S (if that is finite)
        otherwise:        skip the update; S = max(S / 2, min(1, LOSS_SCALE))
    """

    def __init__(self, mode):
        self.mode, self.finite, self.finite_steps = mode, True, 0
        self.value = 1.0 if mode == "none" else LOSS_SCALE

    def scale(self, loss):
        return loss * self.value

    def unscale_(self, optimizer):
        grads = [p.grad for group in optimizer.param_groups for p in group["params"]]
        for grad in grads:
            grad.div_(self.value)
        self.finite = all(bool(grad.isfinite().all()) for grad in grads)

    def step(self, optimizer):
        if self.finite or self.mode != "dynamic":
            optimizer.step()

    def update(self, new_scale=None):
        if self.mode != "dynamic":
            return
        self.finite_steps = self.finite_steps + 1 if self.finite else 0
        if not self.finite:
            self.value = max(self.value / 2, min(1.0, LOSS_SCALE))
        elif self.finite_steps >= PERIOD:
            self.finite_steps = 0
            if self.value * 2 <= torch.finfo(torch.float32).max:
                self.value *= 2


def make_scaler(mode):
    """GradScaler for float16, else LossScale."""
    if COMPUTE_DTYPE != "float16":
        return LossScale(mode)
    return torch.amp.GradScaler(
        "cpu",
        init_scale=LOSS_SCALE,
        growth_interval=PERIOD,
        enabled=mode != "none",
    )


def low_precision():
    """Autocast to COMPUTE_DTYPE (float8 casts in its layers)."""
    return torch.autocast(device_type="cpu", dtype=DTYPE, enabled=not FLOAT8)


def mixed_step(model, optimizer, scaler, x, y, mode):
    """One training step of the mixed run; returns True when the scaler skipped it."""
    optimizer.zero_grad()
    with low_precision():
        loss = LOSS(model(x), y)
    scaler.scale(loss).backward()  # gradients S times larger
    scaler.unscale_(optimizer)  # / S in float32, before the update
    finite = all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
    scaler.step(optimizer)  # the float32 "master" weights' update, unless skipped
    scaler.update(LOSS_SCALE if mode == "static" else None)
    for layer in model.modules():
        if isinstance(layer, Float8Linear):
            layer.record()  # the next step's delayed scales
    if isinstance(scaler, LossScale):
        return mode == "dynamic" and not finite
    return scaler.is_enabled() and not finite  # GradScaler skips at any scale


def float32_loss(model, x, y):
    """The float32 loss of `model`'s weights: no autocast, no float8."""
    plain = build_model(float8=False)
    plain.load_state_dict(model.state_dict())
    with torch.no_grad():
        return LOSS(plain(x), y).item()


def mixed_precision_step(x, y):
    """One step at the fixed loss scale; the loss after it, in COMPUTE_DTYPE."""
    model = build_model()
    mixed_step(model, make_optimizer(model), make_scaler("static"), x, y, "static")
    with torch.no_grad(), low_precision():
        return LOSS(model(x), y).item()


def float32_step(x, y):
    """The float32 twin: the same step, no low precision, no loss scale."""
    model = build_model(float8=False)
    optimizer = make_optimizer(model)
    LOSS(model(x), y).backward()
    optimizer.step()
    return float32_loss(model, x, y)


def train(x, y):
    """STEPS steps of a float32 and a mixed run: final float32 losses, skipped steps."""
    float32_model, mixed_model = build_model(float8=False), build_model()
    float32_optimizer = make_optimizer(float32_model)
    optimizer, scaler = make_optimizer(mixed_model), make_scaler(MODE)
    skipped = 0
    for _ in range(STEPS):
        float32_optimizer.zero_grad()
        LOSS(float32_model(x), y).backward()
        float32_optimizer.step()
        skipped += mixed_step(mixed_model, optimizer, scaler, x, y, MODE)
    final = {"float32": float32_loss(float32_model, x, y)}
    final["mixed"] = float32_loss(mixed_model, x, y)
    return final, skipped


def json_number(value):
    """A float for strict JSON: "nan", "inf" or "-inf" if not finite."""
    return value if math.isfinite(value) else str(value)


def main():
    x, y = make_batch()
    mixed_new, float32_new = mixed_precision_step(x, y), float32_step(x, y)
    print(f"after the step: {COMPUTE_DTYPE} {mixed_new!r}, float32 {float32_new!r}")
    final, skipped = train(x, y)
    print(f"after {STEPS} steps: {final}, skipped: {skipped}")
    names = list(globals())  # the settings: the constants from MODEL_SEED to NOISE_STD
    names = names[names.index("MODEL_SEED") : names.index("NOISE_STD")]
    summary = {
        "mixed_new": json_number(mixed_new),
        "float32_new": json_number(float32_new),
        "final_loss": {name: json_number(loss) for name, loss in final.items()},
        "skipped_steps": {"mixed": skipped},
        "config": {name.lower(): globals()[name] for name in names},
        "versions": {"torch": version("torch"), "numpy": version("numpy")},
    }
    print(json.dumps(summary, allow_nan=False))


if __name__ == "__main__":
    main()
