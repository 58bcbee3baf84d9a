"""The model registry: which network a step trains, and its parameters as a named tree.

Rule: a model is one entry of ``MODELS``: a function ``(d_in, d_out, rngs) -> nnx.Module`` whose
call maps an (N, d_in) batch to (N, d_out) predictions and whose only state is ``nnx.Param``.
``'linear'`` is the exercise's ``nnx.Linear`` with Flax's default initializers; adding a model
(an MLP, say) is one more entry. Parameters are addressed by their path in the module tree,
joined with dots (``kernel``, ``bias``, ``layers.0.kernel`` ...), so nothing downstream assumes a
fixed kernel/bias pair.

Example::

    >>> model = build_model("linear", 3, 2, nnx.Rngs(0))
    >>> list(param_arrays(nnx.state(model, nnx.Param)))
    ['kernel', 'bias']
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
from flax import nnx

ModelBuilder = Callable[[int, int, nnx.Rngs], nnx.Module]
Params = dict[str, jax.Array]


def _linear(d_in: int, d_out: int, rngs: nnx.Rngs) -> nnx.Module:
    """The exercise's layer: y = x @ kernel + bias, Flax's default initializers."""
    return nnx.Linear(d_in, d_out, rngs=rngs)


MODELS: dict[str, ModelBuilder] = {"linear": _linear}
DEFAULT_MODEL = "linear"


def build_model(name: str, d_in: int, d_out: int, rngs: nnx.Rngs) -> nnx.Module:
    """A freshly initialized model ``name`` from the registry."""
    if name not in MODELS:
        raise ValueError(f"model must be one of {', '.join(MODELS)}; got {name!r}")
    return MODELS[name](d_in, d_out, rngs)


def _order(path: tuple) -> tuple:
    # Within a layer the weight comes before its bias, as a reader expects; layers in tree order.
    return (path[:-1], path[-1] != "kernel", path[-1])


def param_arrays(state: nnx.State) -> Params:
    """{dotted path: array} of a Param State (of a model or of its gradients), weights first."""
    flat = dict(nnx.to_flat_state(state))
    return {".".join(map(str, path)): flat[path][...] for path in sorted(flat, key=_order)}


@functools.lru_cache(maxsize=64)
def param_shapes(name: str, d_in: int, d_out: int) -> dict[str, tuple[int, ...]]:
    """{path name: shape} of model ``name``'s parameters, in ``param_arrays`` order; no compute."""
    # A list, not the dict itself: pytree flattening would sort the dict's keys.
    names, shapes = [], []

    def abstract_params():
        params = param_arrays(nnx.state(build_model(name, d_in, d_out, nnx.Rngs(0)), nnx.Param))
        names.extend(params)
        return list(params.values())

    shapes = jax.eval_shape(abstract_params)
    return {path: tuple(array.shape) for path, array in zip(names, shapes, strict=True)}
