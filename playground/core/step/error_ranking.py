"""Which parameter's gradient a recipe changes most: a ranking that never divides by nothing.

Rule, for each parameter p of a step report, its layer L (p's name without its last part:
``attention.key.bias`` -> ``attention.key``; a top-level parameter's layer is the model), all
norms in float64 over p's entries::

    error(p)     ||g_mixed(p) - g_float32(p)||
    scale(L)     ||g_float32 of L's parameters together||        (its layer's gradient norm)
    near zero    ||g_float32(p)|| <= NEAR_ZERO * scale(L)
    score(p)     error(p) / ||g_float32(p)||    by "relative" (``norm_rel_error``)
                 error(p) / scale(L)            by "layer", when p's gradient is near zero
                 (0 when the error is 0; inf when scale(L) is 0 but the error is not)

Ranked by score, largest first (a non-finite score first; the report's order on a tie). A
parameter whose float32 gradient is (near) zero has a relative error set by rounding noise over
almost nothing: a transformer's key bias, whose exact gradient is 0 (a shift of every key adds
the same number to a query's scores, which softmax ignores), would lead a ranking by relative
error with its rounding noise. Against its layer's scale it ranks where its absolute error
belongs.

Example::

    >>> import numpy as np
    >>> from types import SimpleNamespace as P
    >>> kernel = P(name="key.kernel", float32_grads=np.array([3.0, 4.0]),
    ...            mixed_grads=np.array([3.0, 4.05]))
    >>> bias = P(name="key.bias", float32_grads=np.array([1e-9]), mixed_grads=np.array([2e-6]))
    >>> [(r.name, r.by, round(r.score, 4)) for r in error_ranking([kernel, bias])]
    [('key.kernel', 'relative', 0.01), ('key.bias', 'layer', 0.0)]
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from playground.core.formats.metrics import norm_ratio

NEAR_ZERO = 1e-3
RELATIVE, LAYER = "relative", "layer"


@dataclass(frozen=True)
class RankedError:
    """One parameter's place in the ranking (see the module rule)."""

    name: str
    layer: str
    score: float
    by: str  # RELATIVE or LAYER
    error: float
    layer_scale: float


def layer_of(name: str) -> str:
    """The layer a parameter belongs to: its name without the last part ('' at top level)."""
    return name.rpartition(".")[0]


def _norm(values: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(values, np.float64).ravel()))


def error_ranking(params: Iterable[Any]) -> list[RankedError]:
    """The parameters (each with ``name``, ``mixed_grads``, ``float32_grads``) ranked by the
    module rule's score, largest first."""
    params = list(params)
    reference = {p.name: _norm(p.float32_grads) for p in params}
    squares: dict[str, float] = {}
    for p in params:
        squares[layer_of(p.name)] = squares.get(layer_of(p.name), 0.0) + reference[p.name] ** 2
    ranked = []
    for p in params:
        layer = layer_of(p.name)
        scale = math.sqrt(squares[layer])
        with np.errstate(all="ignore"):
            error = _norm(np.asarray(p.mixed_grads, np.float64) - p.float32_grads)
        near = reference[p.name] <= NEAR_ZERO * scale
        by = LAYER if near else RELATIVE
        score = float(norm_ratio(error, scale if near else reference[p.name]))
        ranked.append(RankedError(p.name, layer, score, by, error, scale))
    order = sorted(
        range(len(ranked)),
        key=lambda i: (
            math.isfinite(ranked[i].score),
            -ranked[i].score if math.isfinite(ranked[i].score) else 0.0,
            i,
        ),
    )
    return [ranked[i] for i in order]
