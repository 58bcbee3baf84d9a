"""The model registry: which network a step trains, and its parameters as a named tree.

Rule: a model is one :class:`ModelSpec` entry of ``MODELS``, which holds everything the rest of
the playground needs to know about it:

    build    ``(d_in, d_out, rngs, choice) -> nnx.Module``, whose call maps an (N, d_in) batch
             to (N, d_out) predictions and whose only state is ``nnx.Param``
    options  the settings fields (and :class:`ModelChoice` fields) that apply to it
    hidden   the widths of its hidden activations (one probe each); for a chain of dense
             layers (linear, mlp), with d_in before them and d_out after, the widths of its
             layers, from which its ``layout`` (dense matmul shapes, kept activations) and its
             work (multiply-adds per batch row of one forward pass) are counted; a model that
             is no chain gives its ``shapes`` (a ``Layout``) itself
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
    transformer  one pre-norm block over sequences of ``seq_len`` rows (``core.model.transformer``
            holds its rule): embed, causal multi-head attention with ``heads`` heads, residual,
            SwiGLU MLP (d_ff = 2 x hidden_width), residual, readout; nnx.Linear layers created
            in the order embed, attention.query/key/value/out, mlp.gate/up/down, readout, then
            with norm = layernorm its two nnx.LayerNorms (norms.0 before the attention, norms.1
            before the MLP). Decisions where the specification is silent: heads must divide
            hidden_width (ConfigError on ``heads`` listing the counts that do); a probe is added
            in its activation's own dtype, so the residual stream stays in the matmul dtype; the
            ``accumulation`` setting applies to the dense matmuls, the attention's contractions
            accumulate as XLA does; its work counts each token attending to all T keys (an
            upper bound); refusals of its size name ``hidden_width``

A model runs its operations through an ``OpRun`` (``core.model.op_policy``): each casts its
inputs to its kind's dtype and is watched at its end, in the order its spec's ``operations``
lists them (name, kind, the prefix of the parameters it uses). The layer norm computes, in its
kind's dtype, flax's own rule (``core.model.parts.layer_norm``): in a low dtype x^2 overflows
float16 once |x| passes 256 (the variance is then inf; its check names the norm).

Parameters are addressed by their path in the module tree, joined with dots (``kernel``,
``bias``, ``layers.0.kernel`` ...), so nothing downstream assumes a fixed kernel/bias pair.

Example::

    >>> model = build_model(ModelChoice(), 3, 2, nnx.Rngs(0))
    >>> list(param_arrays(nnx.state(model, nnx.Param)))
    ['kernel', 'bias']
    >>> MODELS["mlp"].work(ModelChoice("mlp", 2, 8), 3, 2)  # 3 x 8 + 8 x 8 + 8 x 2
    104
    >>> MODELS["transformer"].layout(ModelChoice("transformer", hidden_width=8), 3, 2).dense[:2]
    ((3, 8), (8, 8))
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

from playground.core.bounds import ConfigError
from playground.core.model.op_policy import EXERCISE_OPS, OpRun
from playground.core.model.parts import Operation, layer_norm
from playground.core.model.transformer import (
    MAX_HEADS,
    Transformer,
    attention_kept,
    attention_work,
    head_counts,
    normalised_width,
    transformer_dense,
    transformer_hidden,
    transformer_operations,
)

Params = dict[str, jax.Array]
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,  # its default (the tanh approximation)
    "tanh": jnp.tanh,
}
# The MLP's normalisation before each hidden activation (the ``norm`` setting).
NORMS = ("none", "layernorm")


@dataclasses.dataclass(frozen=True)
class ModelChoice:
    """Which model, with its options; hashable, so compiled programs take it as static.

    The fields other than ``name`` are the options of some model (its spec's ``options``);
    ``normalized`` resets those its model does not use to their defaults, so changing the width
    of an MLP never recompiles the linear model. ``seq_len`` and ``heads`` (the transformer's)
    came last, so older positional choices keep their meaning.
    """

    name: str = "linear"
    hidden_layers: int = 2
    hidden_width: int = 64
    activation: str = "relu"
    norm: str = "none"
    seq_len: int = 8
    heads: int = 2

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
        return len(self.hidden_widths)

    @property
    def hidden_widths(self) -> tuple[int, ...]:
        """The width of each hidden activation (each probe's), input side first."""
        return model_spec(self.name).hidden(self)


class Layout(NamedTuple):
    """What the cost model reads of a model at a shape (``ModelSpec.layout``), per batch row.

    dense        (fan_in, fan_out) of every dense matmul (an nnx.Linear with a bias), in
                 forward order
    extra_work   multiply-adds beyond the dense matmuls (the attention's contractions)
    kept         (kind, entries) the backward pass keeps besides the dense layers' inputs, each
                 in its kind's dtype (an MLP's pre-activations; the attention's scores and
                 weights)
    normalised   entries a layer norm normalises (its scale and bias have as many each)
    activations  activation entries held at the peak (the cost model's memory)
    """

    dense: tuple[tuple[int, int], ...]
    extra_work: int
    kept: tuple[tuple[str, int], ...]
    normalised: int
    activations: int


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model of the registry (see the module rule for each field).

    ``build``, ``hidden``, ``slug`` and ``operations`` are plain functions held by the entry,
    so ``MODELS[name].slug(choice)`` calls them; ``about`` is the model's line in the ``model``
    setting's help; ``takes_norm``: it reads the ``norm`` setting too (a later option, kept
    apart from ``options``). ``forward`` runs a model's pass through an ``OpRun``.
    ``shapes``: a model that is no chain of dense layers gives its ``Layout`` itself (None: the
    chain d_in, hidden..., d_out). ``size_field``: the setting that sets its parameters' size,
    which a refusal names. ``sequence``: its rows are tokens of sequences of ``seq_len`` (the
    data then draws sequence targets). ``input_kernel``: the path of the kernel x meets first
    (the first layer's, which a block recipe's and the accumulation's reports read).
    ``check``: raises ConfigError on an option the fields' own ranges cannot express (a
    transformer's heads must divide its width).
    """

    build: Callable[[int, int, nnx.Rngs, ModelChoice], nnx.Module]
    options: tuple[str, ...]
    hidden: Callable[[ModelChoice], tuple[int, ...]]
    slug: Callable[[ModelChoice], str]
    about: str
    operations: Callable[[ModelChoice], tuple[Operation, ...]]
    takes_norm: bool = False
    scripts: tuple[str, ...] = ()
    shapes: Callable[[ModelChoice, int, int], Layout] | None = None
    size_field: str = "hidden_layers"
    sequence: bool = False
    check: Callable[[ModelChoice], None] = lambda choice: None
    input_kernel: str = "layers.0.kernel"

    def layout(self, choice: ModelChoice, d_in: int, d_out: int) -> Layout:
        """The model's ``Layout`` at (d_in, d_out): its own, or a chain's (the widths d_in,
        hidden..., d_out: each pair a dense layer, each hidden width a pre-activation kept,
        normalised when norm is on)."""
        if self.shapes is not None:
            return self.shapes(choice, d_in, d_out)
        hidden = self.hidden(choice)
        widths = (d_in, *hidden, d_out)
        return Layout(
            dense=tuple(itertools.pairwise(widths)),
            extra_work=0,
            kept=tuple(("activation", width) for width in hidden),
            normalised=sum(hidden) if choice.norm != NORMS[0] else 0,
            activations=sum(widths),
        )

    def work(self, choice: ModelChoice, d_in: int, d_out: int) -> int:
        """Multiply-adds per batch row of one forward pass: the sum of the weight matrices'
        sizes (d_in x d_out for the linear model), plus the layout's extra work (a
        transformer's attention). The work caps are counted in these."""
        layout = self.layout(choice, d_in, d_out)
        return sum(a * b for a, b in layout.dense) + layout.extra_work


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
    if isinstance(module, MLP | Transformer):
        return module(x, probes, ops)
    return ops.watch(module(ops.cast("matmul", x)))  # the linear model: one matmul


def param_kind(path: Sequence) -> str:
    """The kind of operation that uses the parameter at a pytree key ``path`` of a model's
    Params: the layer norms' scale and bias are normalisation's, every other one a matmul's."""
    first = getattr(path[0], "key", getattr(path[0], "name", None))
    return "normalisation" if first == "norms" else "matmul"


def _transformer_layout(choice: ModelChoice, d_in: int, d_out: int) -> Layout:
    """The block's Layout (``core.model.transformer``): its eight dense matmuls, the attention's
    2 T d multiply-adds per token, its kept scores, weights, g and u, its two norms' entries."""
    dense = transformer_dense(choice, d_in, d_out)
    kept = attention_kept(choice)
    activations = sum(a for a, _ in dense) + d_out + sum(entries for _, entries in kept)
    return Layout(dense, attention_work(choice), kept, normalised_width(choice), activations)


def _check_heads(choice: ModelChoice) -> None:
    """ConfigError on ``heads`` unless it divides hidden_width (d_head a whole number)."""
    if choice.hidden_width % choice.heads:
        fits = ", ".join(map(str, head_counts(choice.hidden_width, MAX_HEADS)))
        raise ConfigError(
            "heads",
            f"heads (attention heads) must divide hidden_width ({choice.hidden_width}), so "
            f"that every head has hidden_width / heads features: {fits} fit; got {choice.heads}",
        )


MODELS: dict[str, ModelSpec] = {
    "linear": ModelSpec(
        build=lambda d_in, d_out, rngs, choice: nnx.Linear(d_in, d_out, rngs=rngs),
        options=(),
        hidden=lambda choice: (),
        slug=lambda choice: "linear",
        about="the exercise's nnx.Linear",
        operations=lambda choice: (Operation("dense", "matmul", ""),),
        scripts=("jax", "pytorch"),
        size_field="d_in",
        input_kernel="kernel",
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
    "transformer": ModelSpec(
        build=Transformer,
        options=("hidden_width", "seq_len", "heads"),
        hidden=transformer_hidden,
        slug=lambda c: (
            f"transformer{c.hidden_width}-t{c.seq_len}h{c.heads}"
            + ("-layernorm" if c.norm == "layernorm" else "")
        ),
        about=(
            "one pre-norm block: causal multi-head attention and a SwiGLU MLP over sequences "
            "of seq_len rows, width hidden_width"
        ),
        operations=transformer_operations,
        takes_norm=True,
        scripts=("jax", "pytorch"),
        shapes=_transformer_layout,
        size_field="hidden_width",
        sequence=True,
        check=_check_heads,
        input_kernel="embed.kernel",
    ),
}
DEFAULT_MODEL = ModelChoice()


def model_spec(name: str) -> ModelSpec:
    """The registry's entry ``name``; ValueError naming the models for any other name."""
    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {name!r}")
    return MODELS[name]


def input_kernel(choice: ModelChoice) -> str:
    """The path of the kernel the batch x meets first (its registry entry's ``input_kernel``)."""
    return model_spec(choice.name).input_kernel


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
