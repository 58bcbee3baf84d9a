"""Code export: the page's step as a standalone script that anyone can run without the playground.

Rule: ``export_script(config)`` writes a Python script that imports only jax, flax (nnx), optax,
numpy and the standard library, and that

    rebuilds make_batch(config)            same numpy PCG64 draws, same float32 arithmetic order
    runs mixed_precision_step(...)         the exercise's step, compute dtype = config's
    runs float32_step(...)                 its float32 twin: no casts, no loss scale
    prints one JSON line (its last)        {"mixed_new", "float32_new", "config", "versions"}

Compiled, as the page runs it. XLA on CPU rounds a compiled program differently from op-by-op
(eager) execution: inside a fusion it may keep a low-precision intermediate in float32, and it
contracts a multiply followed by an add into one fused multiply-add (FMA). Run eagerly, the
script's functions differ from the page in a few last bits now and then (8 of 48 losses in one
check), so the script jits each step the way ``run_report`` jits ``_both_steps``: the batch, lr
and loss scale as traced np.float32 arguments, the compiler options ``report.COMPILER_OPTIONS``,
and the starting parameters as an argument, drawn by a compiled call of their own from
``jax.random.key(np.uint32(seed))`` (the key ``nnx.Rngs(seed)`` makes), as ``run_report`` draws
them with ``models.initial_state``. A program that draws the weights itself may lay them out
differently in memory, and its float32 matmul then rounds differently (the float32 twin's loss
moved by one unit in the last place at 256 x 64 x 16 when the page began to pass them in).

Equality with the page, and its one known gap: on the same machine and library versions the
script prints ``run_report(config)``'s ``mixed_new_loss`` and ``float32_new_loss`` bit for bit.
Checked on 736 configs (both dtypes, seeds up to 2^32 - 1, lr 0 to 1.7, loss scales 2^-126 to
2^126, data scales 2^-12 to 2^10, shapes 1 x 1 x 1 to 128 x 100 x 7): all 1,472 losses equal
but 20 float32-twin losses, all at shapes with N = 1 or D_in = 1, each off by 1 to 5 units in
the last place. At those shapes XLA turns a matmul into elementwise products, and whether a
product is fused into an FMA with the addition after it depends on what else the compiled
program returns. The page's program also returns the parameters, gradients and updates for its
charts, packed into two arrays; even the page's own step code, compiled to return only the
losses, differs from the page there. Matching those last bits would mean copying the page's
output packing into the script, which would then be about the page rather than the exercise.
Checked again after the parameters became an argument and the compiler options changed, on 60
random configs of the same kinds (N = 1 and D_in = 1 among them): all 120 losses were equal.

Non-finite losses are written as the strings "nan", "inf" and "-inf" (``views.numbers``'s rule),
so the JSON line is strict. The script reproduces the exercise only: the linear model, SGD and
the synthetic batch. A config with another model or optimizer is refused with a ConfigError
rather than exported as a script whose numbers would differ from the page's; the MLP's options
and the training-run settings (group "dynamics") do not change this step and are ignored.
"""

from __future__ import annotations

import json
import math

from playground.core import report
from playground.core.data import NOISE_STD
from playground.core.settings import ConfigError, StepConfig, defaults, settings

# The settings the script reproduces, in the order they are written as constants.
EXPORTED_FIELDS = (
    "model_seed",
    "data_seed",
    "n",
    "d_in",
    "d_out",
    "lr",
    "loss_scale",
    "input_scale",
    "target_scale",
    "compute_dtype",
)
# Options only the MLP reads; with the linear model they change nothing.
MLP_OPTIONS = ("hidden_layers", "hidden_width", "activation")
# Compute dtypes the script's step handles (a plain cast; no float8 scaling).
SCRIPT_DTYPES = ("bfloat16", "float16")
# The script must compile as playground.core.report._both_steps does.
COMPILER_OPTIONS = report.COMPILER_OPTIONS


def export_filename(config: StepConfig) -> str:
    """A file name for the exported script, e.g. ``mixed_precision_step_bfloat16_seed0.py``."""
    return f"mixed_precision_step_{config.compute_dtype}_seed{config.model_seed}.py"


def export_script(config: StepConfig) -> str:
    """The standalone script reproducing ``run_report(config)``'s two new losses.

    Args:
      config: a validated StepConfig.

    Returns:
      The script's source text (ends with a newline; lines of at most 88 characters).

    Raises:
      ConfigError: a setting the script does not reproduce differs from its default, or the
        compute dtype is not one of SCRIPT_DTYPES.
    """
    _check_exportable(config)
    return _header(config) + _constants(config) + _BODY


def _check_exportable(config: StepConfig) -> None:
    if config.compute_dtype not in SCRIPT_DTYPES:
        raise ConfigError(
            "compute_dtype",
            "the exported script reproduces the exercise's step, which computes in "
            f"{' or '.join(SCRIPT_DTYPES)}; got {config.compute_dtype!r}",
        )
    table, default = settings(), defaults()
    # Run settings, and float8's while the dtype (checked above) is not float8, change nothing.
    ignored = ("dynamics", "float8")
    for name, bounds in table.items():
        if name in EXPORTED_FIELDS or name in MLP_OPTIONS or bounds.group in ignored:
            continue
        if getattr(config, name) != default[name]:
            raise ConfigError(
                name,
                "the exported script reproduces the exercise's step only (nnx.Linear, "
                f"optax.sgd); {name} ({bounds.label}) must be {default[name]!r} to export it, "
                f"got {getattr(config, name)!r}",
            )


def _literal(value: int | float | str) -> str:
    """``value`` as Python source that evaluates to exactly the same value."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    mantissa, exponent = math.frexp(value)
    if mantissa == 0.5 and abs(exponent - 1) >= 10:  # a far power of two reads better as 2.0**k
        return f"2.0**{exponent - 1}"
    return repr(float(value)).replace("e+", "e")  # 1e+38 -> 1e38, as ruff format writes it


def _header(config: StepConfig) -> str:
    table = settings()
    values = {name: _literal(getattr(config, name)) for name in EXPORTED_FIELDS}
    name_width = max(map(len, values))
    value_width = max(map(len, values.values()))
    rows = [
        f"    {name:<{name_width}}  {value:<{value_width}}  {table[name].label}"
        for name, value in values.items()
    ]
    dtype = config.compute_dtype
    return f'''"""One mixed-precision training step, exported from the mixed-precision playground.

The script rebuilds the playground's synthetic batch and runs two versions of one SGD
step of an nnx.Linear layer, both starting from the same initial weights:

  mixed_precision_step  float32 master weights, a {dtype} forward and backward pass
                        and a fixed loss scale (the exercise);
  float32_step          the same step in float32 throughout, without a loss scale.

Settings (the constants below):

{chr(10).join(rows)}

It prints both losses after the step; the last line is one JSON object with "mixed_new",
"float32_new", "config" and "versions". Losses that are not finite appear as the strings
"nan", "inf" and "-inf", so the line is strict JSON. On the same machine with the same
jax, jaxlib and numpy versions, the two numbers equal the page's "mixed new loss" and
"float32 new loss" bit for bit. (When N or D_in is 1, a loss can differ in its last few
bits: see the note in main.)

Requires only jax, flax, optax and numpy. Run it with

    python {export_filename(config)}
"""

import json
import math
from importlib.metadata import version

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

'''


def _constants(config: StepConfig) -> str:
    table = settings()
    lines = ["# Settings exported from the page."]
    for name in EXPORTED_FIELDS:
        lines.append(f"{name.upper()} = {_literal(getattr(config, name))}  # {table[name].label}")
    lines += [
        "",
        "# Standard deviation of the noise added to the teacher's targets.",
        f"NOISE_STD = {_literal(NOISE_STD)}",
        "# The XLA options the playground compiles its step with; they are part of what",
        "# decides how low-precision intermediate results are rounded.",
        "COMPILER_OPTIONS = {",
        *(f"    {json.dumps(name)}: {value!r}," for name, value in COMPILER_OPTIONS.items()),
        "}",
    ]
    return "\n".join(lines) + "\n"


_BODY = '''

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
        return jnp.mean((model(x) - y) ** 2)

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
'''
