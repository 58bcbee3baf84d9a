"""The model registry: which network a step trains, and its parameters as a named tree.

Rule: a model is one entry of ``MODELS``: a function ``(d_in, d_out, rngs, choice) -> nnx.Module``
whose call maps an (N, d_in) batch to (N, d_out) predictions and whose only state is
``nnx.Param``. A model with hidden activations also accepts ``probes``: one zero array per
hidden activation, added to it, so that the gradient with respect to a probe is the gradient
with respect to that activation.

    linear  the exercise's nnx.Linear with Flax's default initializers (no hidden activations)
    mlp     nnx.Linear layers d_in -> W, (W -> W) x (hidden_layers - 1), W -> d_out, created in
            that order from one nnx.Rngs; the activation after every layer but the last

Parameters are addressed by their path in the module tree, joined with dots (``kernel``,
``bias``, ``layers.0.kernel`` ...), so nothing downstream assumes a fixed kernel/bias pair.

Example::

    >>> model = build_model(ModelChoice(), 3, 2, nnx.Rngs(0))
    >>> list(param_arrays(nnx.state(model, nnx.Param)))
    ['kernel', 'bias']
"""

from __future__ import annotations

import dataclasses
import functools
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

    The options of another model are reset to their defaults (``normalized``), so changing the
    width of an MLP never recompiles the linear model.
    """

    name: str = "linear"
    hidden_layers: int = 2
    hidden_width: int = 64
    activation: str = "relu"

    def normalized(self) -> ModelChoice:
        return self if self.name == "mlp" else ModelChoice(self.name)

    @property
    def hidden_count(self) -> int:
        """The number of hidden activations (probes the model takes)."""
        return self.hidden_layers if self.name == "mlp" else 0


class MLP(nnx.Module):
    """Linear layers with an activation after every one but the last (see the module rule)."""

    def __init__(self, d_in: int, d_out: int, rngs: nnx.Rngs, choice: ModelChoice):
        widths = [d_in] + [choice.hidden_width] * choice.hidden_layers + [d_out]
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


MODELS: dict[str, Callable[[int, int, nnx.Rngs, ModelChoice], nnx.Module]] = {
    "linear": lambda d_in, d_out, rngs, choice: nnx.Linear(d_in, d_out, rngs=rngs),
    "mlp": MLP,
}
DEFAULT_MODEL = ModelChoice()


def build_model(choice: ModelChoice, d_in: int, d_out: int, rngs: nnx.Rngs) -> nnx.Module:
    """A freshly initialized model from the registry."""
    if choice.name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {choice.name!r}")
    return MODELS[choice.name](d_in, d_out, rngs, choice)


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
