"""One mixed-precision training step, exported from the mixed-precision playground.

The script rebuilds the playground's synthetic batch and runs two versions of one SGD
step of an nnx.Linear layer, both starting from the same initial weights:

  mixed_precision_step  float32 master weights, a forward and backward pass in
                        COMPUTE_DTYPE and a fixed loss scale (the exercise);
  float32_step          the same step in float32 throughout, without a loss scale.

Settings (the constants below):

    model_seed     0           model seed
    data_seed      0           data seed
    n              256         batch rows N
    d_in           64          input width D_in
    d_out          16          output width D_out
    lr             0.1         learning rate
    loss_scale     2.0**10     loss scale
    input_scale    1.0         input scale
    target_scale   1.0         target scale
    compute_dtype  "bfloat16"  compute dtype

It prints both losses after the step; the last line is one JSON object with "mixed_new",
"float32_new", "config" and "versions". Losses that are not finite appear as the strings
"nan", "inf" and "-inf", so the line is strict JSON. On the same machine with the same
jax, jaxlib and numpy versions, the two numbers equal the page's "mixed new loss" and
"float32 new loss" bit for bit. (When N or D_in is 1, a loss can differ in its last few
bits: see the note in main.)

Requires only jax, flax, optax and numpy. Run it with

    python mixed_precision_step_bfloat16_seed0.py
"""

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

# Standard deviation of the noise added to the teacher's targets.
NOISE_STD = 0.1
# The XLA options the playground compiles its step with; they are part of what
# decides how low-precision intermediate results are rounded.
COMPILER_OPTIONS = {
    "xla_backend_optimization_level": 1,
    "xla_cpu_use_fusion_emitters": False,
}
# --- end of settings ---


def make_batch():
    """The playground's batch: x = input_scale * z and y = target_scale * (z @ T + e).

    z (N x D_IN), the teacher T (D_IN x D_OUT) and the noise e (N x D_OUT) are
    standard normal float32 draws from one numpy PCG64 generator, taken in that order.
    Every product below is a float32 operation in the playground's order, so x and y
    are the same bits as on the page.
    """
    rng = np.random.default_rng(DATA_SEED)
    z = rng.standard_normal((N, D_IN), dtype=np.float32)
    teacher = rng.standard_normal((D_IN, D_OUT), dtype=np.float32)
    # Divide by sqrt(D_IN) so that z @ teacher has entries of order one at any width.
    teacher /= np.float32(np.sqrt(D_IN))
    noise = rng.standard_normal((N, D_OUT), dtype=np.float32)
    noise *= np.float32(NOISE_STD)
    x = np.float32(INPUT_SCALE) * z
    y = np.float32(TARGET_SCALE) * (z @ teacher + noise)
    return x, y


def low_precision_loss(model, x, y, compute_dtype):
    """Mean squared error of a rounded copy of `model` on rounded data.

    The result is in compute_dtype.
    """
    # Take the parameter arrays out of the layer; graphdef keeps the layer's structure.
    graphdef, params = nnx.split(model, nnx.Param)
    # Round each parameter. tree_map makes new arrays, so the float32 weights of `model`
    # are left as they were, and gradients still flow back through the casts to them.
    low_params = jax.tree.map(lambda p: p.astype(compute_dtype), params)
    # A throwaway layer built around the rounded arrays.
    temporary = nnx.merge(graphdef, low_params)
    # The rounded x and weights set the matmul's dtype; the rounded y only enters the
    # subtraction and the mean, whose result stays in compute_dtype.
    prediction = temporary(x.astype(compute_dtype))
    return jnp.mean((prediction - y.astype(compute_dtype)) ** 2)


def initial_params(seed):
    """The starting weight and bias of nnx.Linear(D_IN, D_OUT, rngs=nnx.Rngs(seed)).

    seed is a uint32 array; jax.random.key(seed) is the key nnx.Rngs(seed) makes.
    """
    layer = nnx.Linear(D_IN, D_OUT, rngs=nnx.Rngs(jax.random.key(seed)))
    return nnx.state(layer)


def layer_with(params):
    """A new nnx.Linear(D_IN, D_OUT) holding a copy of params; it draws nothing."""
    shape = nnx.eval_shape(lambda: nnx.Linear(D_IN, D_OUT, rngs=nnx.Rngs(0)))
    graphdef, _ = nnx.split(shape)
    return nnx.merge(graphdef, params, copy=True)


def mixed_precision_step(params, x, y, lr, loss_scale, compute_dtype=COMPUTE_DTYPE):
    """One SGD step with float32 weights and a low-precision pass; returns the new loss.

    params are the layer's starting parameters (initial_params(seed)), x and y are
    float32 arrays of shapes (N, D_in) and (N, D_out), lr >= 0 and loss_scale > 0.
    The result is a float32 array of shape (1,): the unscaled compute_dtype loss
    after the update.
    """
    dtype = jnp.dtype(compute_dtype)
    # The layer owns the float32 "master" weights; the optimizer updates exactly those.
    model = layer_with(params)
    optimizer = nnx.Optimizer(model, optax.sgd(lr), wrt=nnx.Param)

    def scaled_loss(model):
        # Widen the low-precision loss to float32, then multiply by the scale, so
        # that the backward pass carries gradients loss_scale times larger, away from
        # the bottom of the compute dtype's range.
        loss = low_precision_loss(model, x, y, dtype)
        return loss.astype(jnp.float32) * loss_scale

    # Differentiate with respect to the float32 layer: the gradient leaves come back as
    # float32, though their values went through the low-precision backward pass.
    _, scaled_grads = nnx.value_and_grad(scaled_loss)(model)
    # Undo the scale in float32 before the update; left in, it would also multiply the
    # step size by loss_scale.
    grads = jax.tree.map(lambda g: g.astype(jnp.float32) / loss_scale, scaled_grads)
    # The one and only update of the float32 weights: w <- w - lr * grad.
    optimizer.update(model, grads)
    # Measure the updated layer the same low-precision way, this time without the scale.
    new_loss = low_precision_loss(model, x, y, dtype)
    return new_loss.astype(jnp.float32).reshape((1,))


def float32_step(params, x, y, lr):
    """The float32 twin: same layer, data and SGD update, with no casts and no scale."""
    model = layer_with(params)
    optimizer = nnx.Optimizer(model, optax.sgd(lr), wrt=nnx.Param)

    def loss_fn(model):
        # float32 at full precision: on a GPU, JAX's default float32 matmul may use TF32
        # or bfloat16 passes, and the twin would no longer be float32.
        with jax.default_matmul_precision("highest"):
            prediction = model(x)
        return jnp.mean((prediction - y) ** 2)

    _, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss_fn(model).reshape((1,))


def json_number(value):
    """A float for strict JSON: non-finite values become "nan", "inf" or "-inf"."""
    return value if math.isfinite(value) else str(value)


def main():
    x, y = make_batch()
    # Draw the starting parameters in a compiled call of their own and pass them to
    # each step, as the playground does: a step that drew them itself could lay the
    # weights out differently in memory and round its float32 matmul differently.
    params = jax.jit(initial_params)(np.uint32(MODEL_SEED))
    # Compile each step, as the playground does: the parameters, the batch, lr and the
    # loss scale are traced inputs; the dtype is fixed at compile time. Compiled code
    # may keep a low-precision intermediate in float32 and may merge a multiply and an
    # add into one fused multiply-add, so an eager run can differ in the last bits.
    # Note: when N or D_in is 1, the matmul becomes elementwise products, and which of
    # them get merged depends on everything the program returns. The playground's
    # program also returns gradients and parameters for its charts, so at those shapes
    # a loss here can differ from the page's in its last few bits.
    compiled_mixed = jax.jit(
        mixed_precision_step,
        static_argnames=("compute_dtype",),
        compiler_options=COMPILER_OPTIONS,
    )
    compiled_float32 = jax.jit(float32_step, compiler_options=COMPILER_OPTIONS)
    lr = np.float32(LR)
    loss_scale = np.float32(LOSS_SCALE)
    mixed = compiled_mixed(params, x, y, lr, loss_scale, COMPUTE_DTYPE)
    mixed_new = float(mixed[0])
    float32_new = float(compiled_float32(params, x, y, lr)[0])
    print(f"{COMPUTE_DTYPE} mixed-precision loss after the step: {mixed_new!r}")
    print(f"float32 loss after the step: {float32_new!r}")
    config = {
        "model_seed": MODEL_SEED,
        "data_seed": DATA_SEED,
        "n": N,
        "d_in": D_IN,
        "d_out": D_OUT,
        "lr": LR,
        "loss_scale": LOSS_SCALE,
        "input_scale": INPUT_SCALE,
        "target_scale": TARGET_SCALE,
        "compute_dtype": COMPUTE_DTYPE,
    }
    # The library versions: another XLA or numpy build may round differently.
    libraries = ("jax", "jaxlib", "flax", "optax", "numpy")
    versions = {name: version(name) for name in libraries}
    summary = {
        "mixed_new": json_number(mixed_new),
        "float32_new": json_number(float32_new),
        "config": config,
        "versions": versions,
    }
    print(json.dumps(summary, allow_nan=False))


if __name__ == "__main__":
    main()
