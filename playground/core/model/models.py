"""The model registry: which network a step trains, and its parameters as a named tree.

Rule: a model is one :class:`ModelSpec` entry of ``MODELS``, which holds everything the rest of
the playground needs to know about it:

    build    ``(d_in, d_out, rngs, choice) -> nnx.Module``, whose call maps an (N, d_in) batch
             to (N, d_out) predictions and whose only state is ``nnx.Param``
    options  the settings fields (and :class:`ModelChoice` fields) that apply to it
    hidden   the widths of its hidden activations; with d_in before them and d_out after, the
             widths of its chain of dense layers, from which its work (multiply-adds per batch
             row of one forward pass) is counted
    slug     its piece of a download's file name
    scripts  the export frameworks whose script template builds it (``jax``, ``pytorch``;
             ``core.export``); the export refuses it by name for any other

A model with hidden activations also accepts ``probes``: one zero array per hidden activation,
added to it, so that the gradient with respect to a probe is the gradient with respect to that
activation. No module outside this one tests a model's name.

    linear  the exercise's nnx.Linear with Flax's default initializers (no hidden activations)
    mlp     nnx.Linear layers d_in -> W, (W -> W) x (hidden_layers - 1), W -> d_out, created in
            that order from one nnx.Rngs; the activation after every layer but the last; with
            norm = layernorm, an nnx.LayerNorm (param_dtype float32, created after the dense
            layers so their initial weights do not change) between each hidden layer and its
            activation

A model runs its operations through an ``OpRun`` (``core.model.op_policy``): each casts its
inputs to its kind's dtype and is watched at its end, in the order its spec's ``operations``
lists them (name, kind, the prefix of the parameters it uses). The layer norm computes, in its
kind's dtype, flax's own rule (mean, E[x^2] - mean^2 clipped at 0, (x - mean) * rsqrt(var +
epsilon) * scale + bias): in float32 it is ``nnx.LayerNorm``'s own call; flax computes its
statistics in at least float32 whatever it is given, so in a low dtype (the exercise preset:
every operation in the compute dtype) the playground writes the same rule out, and there x^2
overflows float16 once |x| passes 256 (the variance is then inf; its check names the norm).

Parameters are addressed by their path in the module tree, joined with dots (``kernel``,
``bias``, ``layers.0.kernel`` ...), so nothing downstream assumes a fixed kernel/bias pair.

Example::

    >>> model = build_model(ModelChoice(), 3, 2, nnx.Rngs(0))
    >>> list(param_arrays(nnx.state(model, nnx.Param)))
    ['kernel', 'bias']
    >>> MODELS["mlp"].work(ModelChoice("mlp", 2, 8), 3, 2)  # 3 x 8 + 8 x 8 + 8 x 2
    104
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from playground.core.model.op_policy import EXERCISE_OPS, OpRun

Params = dict[str, jax.Array]
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,  # its default (the tanh approximation)
    "tanh": jnp.tanh,
}
# The MLP's normalisation before each hidden activation (the ``norm`` setting).
NORMS = ("none", "layernorm")


class Operation(NamedTuple):
    """One operation of a model's forward pass: its name, its kind (``op_policy.KINDS``) and the
    prefix of the parameters it uses ('' for the linear model's kernel and bias; None: none)."""

    name: str
    kind: str
    params: str | None


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """Which model, with its options; hashable, so compiled programs take it as static.

    The fields other than ``name`` are the options of some model (its spec's ``options``);
    ``normalized`` resets those its model does not use to their defaults, so changing the width
    of an MLP never recompiles the linear model.
    """

    name: str = "linear"
    hidden_layers: int = 2
    hidden_width: int = 64
    activation: str = "relu"
    norm: str = "none"

    def normalized(self) -> ModelChoice:
        """The same choice with every option its model does not read at its default."""
        spec = model_spec(self.name)
        used = {option: getattr(self, option) for option in spec.options}
        if spec.takes_norm:
            used["norm"] = self.norm
        return ModelChoice(self.name, **used)

    @property
    def hidden_count(self) -> int:
        """The number of hidden activations (probes the model takes)."""
        return len(model_spec(self.name).hidden(self))


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model of the registry (see the module rule for each field).

    ``build``, ``hidden``, ``slug`` and ``operations`` are plain functions held by the entry,
    so ``MODELS[name].slug(choice)`` calls them; ``about`` is the model's line in the ``model``
    setting's help; ``takes_norm``: it reads the ``norm`` setting too (a later option, kept
    apart from ``options``). ``forward`` runs a model's pass through an ``OpRun``.
    """

    build: Callable[[int, int, nnx.Rngs, ModelChoice], nnx.Module]
    options: tuple[str, ...]
    hidden: Callable[[ModelChoice], tuple[int, ...]]
    slug: Callable[[ModelChoice], str]
    about: str
    operations: Callable[[ModelChoice], tuple[Operation, ...]]
    takes_norm: bool = False
    scripts: tuple[str, ...] = ()

    def widths(self, choice: ModelChoice, d_in: int, d_out: int) -> tuple[int, ...]:
        """The widths of the chain of dense layers, input to output."""
        return (d_in, *self.hidden(choice), d_out)

    def work(self, choice: ModelChoice, d_in: int, d_out: int) -> int:
        """Multiply-adds per batch row of one forward pass: the sum of the weight matrices'
        sizes (d_in x d_out for the linear model). The work caps are counted in these."""
        widths = self.widths(choice, d_in, d_out)
        return sum(a * b for a, b in itertools.pairwise(widths))


def _mlp_hidden(choice: ModelChoice) -> tuple[int, ...]:
    return (choice.hidden_width,) * choice.hidden_layers


class MLP(nnx.Module):
    """Linear layers with an activation after every one but the last, and optionally a layer
    norm before each activation (see the module rule)."""

    def __init__(self, d_in: int, d_out: int, rngs: nnx.Rngs, choice: ModelChoice):
        widths = [d_in, *_mlp_hidden(choice), d_out]
        self.layers = nnx.List(
            [nnx.Linear(a, b, rngs=rngs) for a, b in zip(widths[:-1], widths[1:], strict=True)]
        )
        self.activation = choice.activation
        if choice.norm == "layernorm":
            self.norms = nnx.List(
                [nnx.LayerNorm(w, param_dtype=jnp.float32, rngs=rngs) for w in widths[1:-1]]
            )
        else:
            self.norms = None

    def __call__(
        self, x: jax.Array, probes: Sequence[jax.Array] = (), ops: OpRun | None = None
    ) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        if ops is None:  # every operation in x's dtype
            ops = OpRun(EXERCISE_OPS, str(x.dtype))
        for index, layer in enumerate(self.layers[:-1]):
            x = ops.watch(layer(ops.cast("matmul", x)))
            if self.norms is not None:
                x = layer_norm(self.norms[index], x, ops)
            x = ops.watch(act(ops.cast("activation", x)))
            if probes:
                x = x + probes[index]
        return ops.watch(self.layers[-1](ops.cast("matmul", x)))


def layer_norm(norm: nnx.LayerNorm, x: jax.Array, ops: OpRun) -> jax.Array:
    """``norm`` applied to x in the normalisation dtype of ``ops``, watched (module rule)."""
    dtype = ops.dtype("normalisation")
    x = x.astype(dtype)
    if jnp.dtype(dtype) == jnp.float32:
        return ops.watch(norm(x))  # flax's own: statistics and result in float32
    scale, bias = norm.scale[...].astype(dtype), norm.bias[...].astype(dtype)
    mean = jnp.mean(x, axis=-1, keepdims=True)
    mean_square = jnp.mean(x * x, axis=-1, keepdims=True)
    variance = jnp.maximum(0, mean_square - mean * mean)
    normalized = (x - mean) * (jax.lax.rsqrt(variance + norm.epsilon) * scale) + bias
    return ops.watch(normalized, jnp.all(jnp.isfinite(variance)))


def _mlp_operations(choice: ModelChoice) -> tuple[Operation, ...]:
    operations = []
    for index in range(choice.hidden_layers):
        operations.append(Operation(f"layers.{index}", "matmul", f"layers.{index}."))
        if choice.norm == "layernorm":
            operations.append(Operation(f"norms.{index}", "normalisation", f"norms.{index}."))
        operations.append(Operation(f"{choice.activation} {index}", "activation", None))
    last = choice.hidden_layers
    return (*operations, Operation(f"layers.{last}", "matmul", f"layers.{last}."))


def forward(module: nnx.Module, x: jax.Array, probes: Sequence[jax.Array], ops: OpRun) -> jax.Array:
    """The model's output for x, each operation run and watched by ``ops`` (module rule)."""
    if isinstance(module, MLP):
        return module(x, probes, ops)
    return ops.watch(module(ops.cast("matmul", x)))  # the linear model: one matmul


def param_kind(path: Sequence) -> str:
    """The kind of operation that uses the parameter at a pytree key ``path`` of a model's
    Params: the layer norms' scale and bias are normalisation's, every other one a matmul's."""
    first = getattr(path[0], "key", getattr(path[0], "name", None))
    return "normalisation" if first == "norms" else "matmul"


MODELS: dict[str, ModelSpec] = {
    "linear": ModelSpec(
        build=lambda d_in, d_out, rngs, choice: nnx.Linear(d_in, d_out, rngs=rngs),
        options=(),
        hidden=lambda choice: (),
        slug=lambda choice: "linear",
        about="the exercise's nnx.Linear",
        operations=lambda choice: (Operation("dense", "matmul", ""),),
        scripts=("jax", "pytorch"),
    ),
    "mlp": ModelSpec(
        build=MLP,
        options=("hidden_layers", "hidden_width", "activation"),
        hidden=_mlp_hidden,
        # The norm adds to the slug only when on, so today's file names stay.
        slug=lambda c: (
            f"mlp{c.hidden_layers}x{c.hidden_width}-{c.activation}"
            + ("-layernorm" if c.norm == "layernorm" else "")
        ),
        about="linear layers with an activation between",
        operations=_mlp_operations,
        takes_norm=True,
        scripts=("jax", "pytorch"),
    ),
}
DEFAULT_MODEL = ModelChoice()


def model_spec(name: str) -> ModelSpec:
    """The registry's entry ``name``; ValueError naming the models for any other name."""
    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {name!r}")
    return MODELS[name]


def build_model(choice: ModelChoice, d_in: int, d_out: int, rngs: nnx.Rngs) -> nnx.Module:
    """A freshly initialized model from the registry."""
    return model_spec(choice.name).build(d_in, d_out, rngs, choice)


@functools.partial(jax.jit, static_argnames=("choice", "d_in", "d_out"))
def initial_state(model_seed: jax.Array, *, choice: ModelChoice, d_in: int, d_out: int):
    """The Params of ``build_model(choice, d_in, d_out, nnx.Rngs(jax.random.key(model_seed)))``.

    Compiled on its own, once per (model, d_in, d_out), so that a program taking these
    parameters (the step report) compiles no random draws: drawing them (threefry, then the
    initializers' normal samples) roughly doubled its compilation at every new batch size.
    """
    return nnx.state(build_model(choice, d_in, d_out, nnx.Rngs(jax.random.key(model_seed))))


def rebuilt(choice: ModelChoice, d_in: int, d_out: int, state: nnx.State) -> nnx.Module:
    """A new model of ``build_model``'s structure holding ``state`` (from ``initial_state``); it
    draws nothing, and each call gives a separate module to update in place."""
    return nnx.merge(_graphdef(choice, d_in, d_out), state, copy=True)


@functools.lru_cache(maxsize=64)
def _graphdef(choice: ModelChoice, d_in: int, d_out: int) -> nnx.GraphDef:
    """The structure of ``build_model(choice, d_in, d_out, ...)``, found without computing."""
    return nnx.split(nnx.eval_shape(lambda: build_model(choice, d_in, d_out, nnx.Rngs(0))))[0]


def _order(path: tuple) -> tuple:
    # Within a layer the weight comes before its bias, as a reader expects; layers in tree order.
    return (path[:-1], path[-1] != "kernel", path[-1])


def param_arrays(state: nnx.State) -> Params:
    """{dotted path: array} of a Param State (of a model or of its gradients), weights first."""
    flat = dict(nnx.to_flat_state(state))
    return {".".join(map(str, path)): flat[path][...] for path in sorted(flat, key=_order)}


@functools.lru_cache(maxsize=64)
def param_shapes(choice: ModelChoice, d_in: int, d_out: int) -> dict[str, tuple[int, ...]]:
    """{path name: shape} of the model's parameters, in ``param_arrays`` order; no compute."""
    # A list, not the dict itself: pytree flattening would sort the dict's keys.
    names = []

    def abstract_params():
        params = param_arrays(nnx.state(build_model(choice, d_in, d_out, nnx.Rngs(0)), nnx.Param))
        names.extend(params)
        return list(params.values())

    shapes = jax.eval_shape(abstract_params)
    return {path: tuple(array.shape) for path, array in zip(names, shapes, strict=True)}
