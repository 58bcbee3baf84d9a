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

A model with hidden activations also accepts ``probes``: one zero array per hidden activation,
added to it, so that the gradient with respect to a probe is the gradient with respect to that
activation. No module outside this one tests a model's name.

    linear  the exercise's nnx.Linear with Flax's default initializers (no hidden activations)
    mlp     nnx.Linear layers d_in -> W, (W -> W) x (hidden_layers - 1), W -> d_out, created in
            that order from one nnx.Rngs; the activation after every layer but the last

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

import jax
import jax.numpy as jnp
from flax import nnx

Params = dict[str, jax.Array]
ACTIVATIONS: dict[str, Callable[[jax.Array], jax.Array]] = {
    "relu": jax.nn.relu,
    "gelu": jax.nn.gelu,  # its default (the tanh approximation)
    "tanh": jnp.tanh,
}


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

    def normalized(self) -> ModelChoice:
        """The same choice with every option its model does not read at its default."""
        used = {option: getattr(self, option) for option in model_spec(self.name).options}
        return ModelChoice(self.name, **used)

    @property
    def hidden_count(self) -> int:
        """The number of hidden activations (probes the model takes)."""
        return len(model_spec(self.name).hidden(self))


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """One model of the registry (see the module rule for each field).

    ``build``, ``hidden`` and ``slug`` are plain functions held by the entry, so
    ``MODELS[name].slug(choice)`` calls them; ``about`` is the model's line in the ``model``
    setting's help.
    """

    build: Callable[[int, int, nnx.Rngs, ModelChoice], nnx.Module]
    options: tuple[str, ...]
    hidden: Callable[[ModelChoice], tuple[int, ...]]
    slug: Callable[[ModelChoice], str]
    about: str

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
    """Linear layers with an activation after every one but the last (see the module rule)."""

    def __init__(self, d_in: int, d_out: int, rngs: nnx.Rngs, choice: ModelChoice):
        widths = [d_in, *_mlp_hidden(choice), d_out]
        self.layers = nnx.List(
            [nnx.Linear(a, b, rngs=rngs) for a, b in zip(widths[:-1], widths[1:], strict=True)]
        )
        self.activation = choice.activation

    def __call__(self, x: jax.Array, probes: Sequence[jax.Array] = ()) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for index, layer in enumerate(self.layers[:-1]):
            x = act(layer(x))
            if probes:
                x = x + probes[index]
        return self.layers[-1](x)


MODELS: dict[str, ModelSpec] = {
    "linear": ModelSpec(
        build=lambda d_in, d_out, rngs, choice: nnx.Linear(d_in, d_out, rngs=rngs),
        options=(),
        hidden=lambda choice: (),
        slug=lambda choice: "linear",
        about="the exercise's nnx.Linear",
    ),
    "mlp": ModelSpec(
        build=MLP,
        options=("hidden_layers", "hidden_width", "activation"),
        hidden=_mlp_hidden,
        slug=lambda c: f"mlp{c.hidden_layers}x{c.hidden_width}-{c.activation}",
        about="linear layers with an activation between",
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
