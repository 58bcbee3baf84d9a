"""A mixed-precision step and training run, exported from the playground.

From the page's batch and starting parameters it runs mixed_precision_step (float32
master weights, a pass in COMPUTE_DTYPE, a fixed loss scale: the exercise), float32_step
(its float32 twin) and train (STEPS steps of three runs: float32; mixed, that step with
loss scaling MODE; pure, parameters stored in COMPUTE_DTYPE, rounded by PURE_ROUNDING),
with the settings below (the page's fields, in capitals).

The last printed line is JSON: "mixed_new", "float32_new", "final_loss" (each run's
float32 MSE after the last step), "skipped_steps", "config" and "versions"; a non-finite
loss is a string ("nan", "inf", "-inf"). With the same jax, jaxlib and numpy versions
they equal the page's numbers bit for bit. Requires only jax, flax, optax and numpy:

    python mixed_precision_step_bfloat16_seed0.py
"""

import base64
import json
import math
from importlib.metadata import version

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

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

NOISE_STD = 0.1  # of the noise added to the teacher's targets
DATA = None  # an uploaded batch (float32, little-endian, base64), or None
# The XLA options of the page's step: they decide some roundings.
COMPILER_OPTIONS = {
    "xla_backend_optimization_level": 1,
    "xla_cpu_use_fusion_emitters": False,
}
# --- end of settings ---

OPTIMIZERS = {"sgd": optax.sgd, "adam": optax.adam}  # with optax's own defaults
OPTIMIZERS["momentum"] = lambda lr: optax.sgd(lr, momentum=0.9)
OPTIMIZERS["adamw"] = lambda lr: optax.adamw(lr, weight_decay=0.01)
ACTIVATIONS = {"relu": jax.nn.relu, "gelu": jax.nn.gelu, "tanh": jnp.tanh}
SEQUENCE_MODELS = ("transformer",)  # rows are tokens of sequences of SEQ_LEN
HELD = lambda u, p: u.astype(p.dtype)  # noqa: E731
# Hold each update in its parameter's dtype (the pure run's: COMPUTE_DTYPE).
IN_PARAM_DTYPE = optax.stateless(lambda us, ps: jax.tree.map(HELD, us, ps))


def running_means(z):
    """Each row of z replaced by the mean of its sequence's rows up to it (sequences of
    SEQ_LEN consecutive rows, the last one shorter), in float64, rounded once."""
    padded = -(-N // SEQ_LEN) * SEQ_LEN
    rows = np.zeros((padded, D_IN), np.float64)
    rows[:N] = z
    sums = np.cumsum(rows.reshape(-1, SEQ_LEN, D_IN), axis=1)
    counts = np.arange(1, SEQ_LEN + 1, dtype=np.float64)[None, :, None]
    return (sums / counts).reshape(padded, D_IN)[:N].astype(np.float32)


def make_batch():
    """The upload, or x = input_scale * z, y = target_scale * (z @ T + e): z, T and e
    are float32 normal draws from numpy's PCG64 in that order, all in float32 in the
    page's order, so x and y are the page's bits. The transformer's token t sees its
    sequence so far: its target has the running mean c_t of z in place of z_t."""
    if DATA is not None:
        x, y = (np.frombuffer(base64.b64decode(DATA[k]), "<f4") for k in "xy")
        return x.reshape(N, D_IN), y.reshape(N, D_OUT)
    rng = np.random.default_rng(DATA_SEED)
    z = rng.standard_normal((N, D_IN), dtype=np.float32)
    teacher = rng.standard_normal((D_IN, D_OUT), dtype=np.float32)
    teacher /= np.float32(np.sqrt(D_IN))  # z @ teacher of order one at any width
    noise = rng.standard_normal((N, D_OUT), dtype=np.float32)
    noise *= np.float32(NOISE_STD)
    seen = running_means(z) if MODEL in SEQUENCE_MODELS else z  # what y_t depends on
    x = np.float32(INPUT_SCALE) * z
    return x, np.float32(TARGET_SCALE) * (seen @ teacher + noise)


def layer_norm(norm, x):
    """nnx.LayerNorm `norm` applied in x's dtype: in float32 its own call; in a low
    dtype flax's rule written out in that dtype (flax would widen its statistics):
    (x - mean) * (rsqrt(max(0, E[x^2] - mean^2) + epsilon) * scale) + bias."""
    if x.dtype == jnp.float32:
        return norm(x)
    scale, bias = norm.scale[...].astype(x.dtype), norm.bias[...].astype(x.dtype)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    mean_square = jnp.mean(x * x, axis=-1, keepdims=True)
    variance = jnp.maximum(0, mean_square - mean * mean)
    return (x - mean) * (jax.lax.rsqrt(variance + norm.epsilon) * scale) + bias


def make_norms(widths, rngs):
    """NORM's layer norms, one per width (float32 scale and bias), or None."""
    if NORM != "layernorm":
        return None
    norms = [nnx.LayerNorm(w, param_dtype=jnp.float32, rngs=rngs) for w in widths]
    return nnx.List(norms)


class MultiLayer(nnx.Module):
    """nnx.Linear layers D_IN -> HIDDEN_WIDTH ... -> D_OUT; ACTIVATION between them,
    each hidden layer's output normalised first when NORM is layernorm."""

    def __init__(self, rngs):
        widths = [D_IN, *[HIDDEN_WIDTH] * HIDDEN_LAYERS, D_OUT]
        pairs = zip(widths[:-1], widths[1:], strict=True)
        self.layers = nnx.List([nnx.Linear(a, b, rngs=rngs) for a, b in pairs])
        self.norms = make_norms(widths[1:-1], rngs)  # after the layers: same draws

    def __call__(self, x):
        for index, layer in enumerate(self.layers[:-1]):
            x = layer(x)
            if self.norms is not None:
                x = layer_norm(self.norms[index], x)
            x = ACTIVATIONS[ACTIVATION](x)
        return self.layers[-1](x)


class Attention(nnx.Module):
    """Causal multi-head self-attention within sequences of SEQ_LEN consecutive rows."""

    def __init__(self, width, rngs):
        self.query = nnx.Linear(width, width, rngs=rngs)
        self.key = nnx.Linear(width, width, rngs=rngs)
        self.value = nnx.Linear(width, width, rngs=rngs)
        self.out = nnx.Linear(width, width, rngs=rngs)

    def __call__(self, a):
        rows, width = a.shape
        # A last short sequence is padded with zero rows; with the causal mask no real
        # token sees them, and they are dropped again before the output layer.
        pad = -rows % SEQ_LEN

        def split(t):  # (rows, width) -> (sequences, SEQ_LEN, HEADS, width / HEADS)
            t = jnp.pad(t, ((0, pad), (0, 0)))
            return t.reshape(-1, SEQ_LEN, HEADS, width // HEADS)

        q, k, v = split(self.query(a)), split(self.key(a)), split(self.value(a))
        # flax's dot_product_attention in its pieces: the query scaled by 1/sqrt(d_head)
        # first, each head's scores, a later key's set to the dtype's lowest value
        # (causal: token t sees tokens s <= t), softmax over the keys, the values' sum.
        q = q / jnp.sqrt(width // HEADS).astype(q.dtype)
        scores = jnp.einsum("sqhd,skhd->shqk", q, k)
        causal = jnp.tril(jnp.ones((SEQ_LEN, SEQ_LEN), bool))
        scores = jnp.where(causal, scores, jnp.finfo(scores.dtype).min)
        weights = jax.nn.softmax(scores, axis=-1)
        o = jnp.einsum("shqk,skhd->sqhd", weights, v)
        return self.out(o.reshape(-1, width)[:rows])


class SwiGLU(nnx.Module):
    """The gated MLP: down(silu(gate(b)) * up(b)), gated width 2 x HIDDEN_WIDTH."""

    def __init__(self, width, rngs):
        self.gate = nnx.Linear(width, 2 * width, rngs=rngs)
        self.up = nnx.Linear(width, 2 * width, rngs=rngs)
        self.down = nnx.Linear(2 * width, width, rngs=rngs)

    def __call__(self, b):
        return self.down(jax.nn.silu(self.gate(b)) * self.up(b))


class Transformer(nnx.Module):
    """One pre-norm block on tokens of D_IN features: embed, attention and SwiGLU, each
    added to the residual stream after NORM, then a linear read-out to D_OUT."""

    def __init__(self, rngs):
        self.embed = nnx.Linear(D_IN, HIDDEN_WIDTH, rngs=rngs)
        self.attention = Attention(HIDDEN_WIDTH, rngs)
        self.mlp = SwiGLU(HIDDEN_WIDTH, rngs)
        self.readout = nnx.Linear(HIDDEN_WIDTH, D_OUT, rngs=rngs)
        self.norms = make_norms([HIDDEN_WIDTH] * 2, rngs)  # after the layers, as above

    def normalised(self, index, h):
        return h if self.norms is None else layer_norm(self.norms[index], h)

    def __call__(self, x):
        h = self.embed(x)
        h = h + self.attention(self.normalised(0, h))
        h = h + self.mlp(self.normalised(1, h))
        return self.readout(h)


def build_model(rngs):
    """The page's model: the exercise's nnx.Linear, the multi-layer perceptron or the
    transformer block."""
    if MODEL == "linear":
        return nnx.Linear(D_IN, D_OUT, rngs=rngs)
    if MODEL == "mlp":
        return MultiLayer(rngs)
    if MODEL == "transformer":
        return Transformer(rngs)
    built = "linear, mlp or transformer"
    raise ValueError(f"this script builds MODEL {built}; got {MODEL!r}")


def initial_params(seed):
    """The starting parameters of build_model; seed is a uint32 array."""
    return nnx.state(build_model(nnx.Rngs(jax.random.key(seed))))


def loss_in(model, x, y, dtype):
    """MSE of a copy of `model` rounded to `dtype`, on rounded data, in `dtype`."""
    # The float32 weights stay as they were; gradients flow back through the casts.
    graphdef, params = nnx.split(model, nnx.Param)
    temporary = nnx.merge(graphdef, jax.tree.map(lambda p: p.astype(dtype), params))
    full = "highest" if dtype == jnp.float32 else None  # not a GPU's TF32 default
    with jax.default_matmul_precision(full):
        prediction = temporary(x.astype(dtype))
    return jnp.mean((prediction - y.astype(dtype)) ** 2)


def mixed_precision_step(params, x, y, lr, loss_scale, compute_dtype=COMPUTE_DTYPE):
    """One OPTIMIZER step in compute_dtype: the (1,) float32 unscaled loss after it."""
    dtype = jnp.dtype(compute_dtype)
    # The model owns the float32 "master" weights; the optimizer updates exactly those.
    graphdef, _ = nnx.split(nnx.eval_shape(lambda: build_model(nnx.Rngs(0))))
    model = nnx.merge(graphdef, params, copy=True)
    optimizer = nnx.Optimizer(model, OPTIMIZERS[OPTIMIZER](lr), wrt=nnx.Param)

    def scaled_loss(model):
        # Widened to float32, then scaled: the backward pass carries gradients
        # loss_scale times larger, away from the bottom of the dtype's range.
        return loss_in(model, x, y, dtype).astype(jnp.float32) * loss_scale

    # Gradient leaves come back float32, their values from the low-precision pass.
    _, scaled_grads = nnx.value_and_grad(scaled_loss)(model)
    # Undo the scale in float32 before the update; left in, it would scale the step too.
    grads = jax.tree.map(lambda g: g.astype(jnp.float32) / loss_scale, scaled_grads)
    optimizer.update(model, grads)  # the one update of the float32 weights
    return loss_in(model, x, y, dtype).astype(jnp.float32).reshape((1,))


def float32_step(params, x, y, lr):
    """The float32 twin: the same step with no casts and a scale of 1 (exact)."""
    return mixed_precision_step(params, x, y, lr, 1.0, "float32")


def adjust(scale, counter, finite, period, floor):
    """MODE "dynamic" (jmp's and GradScaler's rule): double the scale after `period`
    finite steps in a row (never to inf); halve it, to `floor` at least, on overflow."""
    if MODE != "dynamic":
        return scale, counter
    counter = jnp.where(finite, counter + 1, 0)
    grow = counter >= period
    grown = scale * 2.0
    kept = jnp.where(grow & jnp.isfinite(grown), grown, scale)
    scale = jnp.where(finite, kept, jnp.maximum(scale / 2.0, floor))
    return scale, jnp.where(grow, 0, counter)


def stochastic_round(value, dtype, key):
    """float32 `value` rounded to `dtype`, up with chance (|v| - lo) / (hi - lo)."""
    info = jnp.finfo(dtype)
    bits = jax.lax.bitcast_convert_type(value, jnp.uint32)
    sign = bits & jnp.uint32(0x80000000)
    magnitude = bits ^ sign
    field = (magnitude >> 23).astype(jnp.int32)
    exponent = jnp.maximum(field, 1) - 127
    drop = (23 - int(info.nmant)) + jnp.maximum(int(info.minexp) - exponent, 0)
    within = drop <= 23  # dtype's gap at |v| is 2^drop float32 steps
    low_mask = (jnp.uint32(1) << jnp.minimum(drop, 23).astype(jnp.uint32)) - 1
    floor = magnitude & ~low_mask
    implicit = jnp.where(field > 0, jnp.uint32(2**23), jnp.uint32(0))
    significand = (magnitude & jnp.uint32(2**23 - 1)) | implicit
    smallest = jnp.uint32(np.float32(info.smallest_subnormal).view(np.uint32))
    lo = jnp.where(within, floor, jnp.uint32(0))
    hi = jnp.where(within, floor + (low_mask + 1), smallest)
    remainder = jnp.where(within, magnitude & low_mask, significand)
    up_shift = jnp.clip(32 - drop, 0, 31).astype(jnp.uint32)
    down_shift = jnp.clip(drop - 32, 0, 31).astype(jnp.uint32)
    threshold = jnp.where(drop <= 32, remainder << up_shift, remainder >> down_shift)
    random = jax.random.bits(key, value.shape, jnp.uint32)
    rounded = jnp.where(random < threshold, hi, lo) | sign
    result = jax.lax.bitcast_convert_type(rounded, jnp.float32)
    return jnp.where(jnp.isfinite(value), result, value).astype(dtype)


def store(params, updates, compensation, key):
    """The pure run's p + update in COMPUTE_DTYPE, by PURE_ROUNDING (Kahan: with c)."""
    if PURE_ROUNDING == "nearest":
        return optax.apply_updates(params, updates), compensation
    if PURE_ROUNDING == "kahan":  # y = u - c; t = p + y; c = (t - p) - y; p = t
        tree = jax.tree.map
        addend = tree(lambda u, c: u - c.astype(u.dtype), updates, compensation)
        total = tree(jnp.add, params, addend)
        return total, tree(lambda t, p, a: (t - p) - a, total, params, addend)
    leaves, tree = jax.tree.flatten(params)
    keys = jax.random.split(key, len(leaves))
    pairs = zip(leaves, tree.flatten_up_to(updates), keys, strict=True)
    rounded = [
        stochastic_round(p.astype(jnp.float32) + u.astype(jnp.float32), p.dtype, k)
        for p, u, k in pairs
    ]
    return jax.tree.unflatten(tree, rounded), compensation


def train(model_seed, x, y, lr, loss_scale, period, steps):
    """STEPS steps of the three runs: float32 MSEs after the last, steps skipped."""
    dtype = jnp.dtype(COMPUTE_DTYPE)
    model = build_model(nnx.Rngs(jax.random.key(model_seed)))
    graphdef, master = nnx.split(model, nnx.Param)
    pure = jax.tree.map(lambda p: p.astype(dtype), master)
    plain = optax.chain(OPTIMIZERS[OPTIMIZER](lr), IN_PARAM_DTYPE)
    dynamic = MODE == "dynamic"  # only the dynamic mode skips non-finite steps
    tx = optax.apply_if_finite(plain, 1001) if dynamic else plain
    start = jnp.float32(1.0) if MODE == "none" else jnp.float32(loss_scale)
    floor = jnp.minimum(jnp.float32(1.0), start)  # jmp's floor; never above the start
    # The stochastic run's random bits: a stream of the model seed, folded per step.
    rounding_key = jax.random.fold_in(jax.random.key(model_seed), 0x73726E64)

    def mse(params):  # in float32, whatever the run stores
        return loss_in(nnx.merge(graphdef, params), x, y, jnp.float32)

    def scaled_step(params, opt_state, scale, counter, comp, key):
        def scaled_loss(point):
            loss = loss_in(nnx.merge(graphdef, point), x, y, dtype)
            return loss.astype(jnp.float32) * scale

        scaled = jax.grad(scaled_loss)(params)
        # Unscaled in float32, then held in the dtype the parameters are stored in.
        unscale = lambda g, p: (g.astype(jnp.float32) / scale).astype(p.dtype)  # noqa: E731
        grads = jax.tree.map(unscale, scaled, params)
        updates, opt_state = tx.update(grads, opt_state, params)
        leaves = jax.tree.leaves(grads)
        skip = dynamic & ~jnp.all(jnp.stack([jnp.isfinite(g).all() for g in leaves]))
        if key is None:  # the float32 masters: to nearest
            new = optax.apply_updates(params, updates)
        else:
            new, new_c = store(params, updates, comp, key)
            if comp is not None:  # a skipped step keeps p and c
                pick = lambda old, n: jnp.where(skip, old, n)  # noqa: E731
                new, comp = jax.tree.map(pick, (params, comp), (new, new_c))
        scale, counter = adjust(scale, counter, ~skip, period, floor)
        return (new, opt_state, scale, counter, comp), skip

    def body(index, carry):
        f32, f32_opt, runs, skipped = carry
        updates, f32_opt = plain.update(jax.grad(mse)(f32), f32_opt, f32)
        f32 = optax.apply_updates(f32, updates)
        key = jax.random.fold_in(rounding_key, index)
        for name, run in runs.items():
            stochastic = name == "pure" and PURE_ROUNDING != "nearest"
            runs[name], skip = scaled_step(*run, key if stochastic else None)
            skipped = skipped | {name: skipped[name] + skip}
        return f32, f32_opt, runs, skipped

    kahan = jax.tree.map(jnp.zeros_like, pure) if PURE_ROUNDING == "kahan" else None
    runs = {
        "mixed": (master, tx.init(master), start, jnp.int32(0), None),
        "pure": (pure, tx.init(pure), start, jnp.int32(0), kahan),
    }
    carry = (master, plain.init(master), runs, {name: jnp.int32(0) for name in runs})
    f32, _, runs, skipped = jax.lax.fori_loop(0, steps, body, carry)
    losses = {"float32": mse(f32)} | {name: mse(run[0]) for name, run in runs.items()}
    return losses, skipped


def json_number(value):
    """A float for strict JSON: non-finite values become "nan", "inf" or "-inf"."""
    return value if math.isfinite(value) else str(value)


def main():
    x, y = make_batch()
    # As the page: parameters drawn by a compiled call of their own, the step compiled
    # with its options (an eager run rounds differently; at N or D_in = 1 a loss can
    # still differ from the page's in its last few bits).
    params = jax.jit(initial_params)(np.uint32(MODEL_SEED))
    options = {"static_argnames": "compute_dtype", "compiler_options": COMPILER_OPTIONS}
    step = jax.jit(mixed_precision_step, **options)
    lr, loss_scale = np.float32(LR), np.float32(LOSS_SCALE)
    mixed_new = float(step(params, x, y, lr, loss_scale, COMPUTE_DTYPE)[0])
    float32_new = float(step(params, x, y, lr, np.float32(1.0), "float32")[0])
    print(f"after the step: {COMPUTE_DTYPE} {mixed_new!r}, float32 {float32_new!r}")
    seed, period, steps = np.uint32(MODEL_SEED), np.int32(PERIOD), np.int32(STEPS)
    losses, skipped = jax.jit(train)(seed, x, y, lr, loss_scale, period, steps)
    final = {name: json_number(float(loss)) for name, loss in losses.items()}
    skipped = {name: int(count) for name, count in skipped.items()}
    print(f"after {STEPS} steps: {final}, skipped: {skipped}")
    names = "model_seed data_seed n d_in d_out lr loss_scale input_scale target_scale"
    names += " compute_dtype model hidden_layers hidden_width activation optimizer"
    names += " steps mode period pure_rounding norm seq_len heads"
    config = {name: globals()[name.upper()] for name in names.split()}
    step_losses = {"mixed_new": mixed_new, "float32_new": float32_new}
    summary = {name: json_number(loss) for name, loss in step_losses.items()}
    summary |= {"final_loss": final, "skipped_steps": skipped, "config": config}
    libraries = ("jax", "jaxlib", "flax", "optax", "numpy")  # others may round apart
    summary["versions"] = {name: version(name) for name in libraries}
    print(json.dumps(summary, allow_nan=False))


if __name__ == "__main__":
    main()
