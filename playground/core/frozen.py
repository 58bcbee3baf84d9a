"""Frozen results: every report the core returns holds read-only numpy arrays.

Rule: a result leaves the core frozen, so a view or a cache that shares it cannot change what
another reader sees. ``freeze`` makes every numpy leaf of a tree read-only, in place.

Example::

    >>> import numpy as np
    >>> tree = freeze({"loss": np.zeros(2)})
    >>> tree["loss"].flags.writeable
    False
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np


def freeze(tree: Any) -> Any:
    """``tree`` with every numpy array leaf made read-only (in place; returns the tree)."""
    for leaf in jax.tree.leaves(tree):
        if isinstance(leaf, np.ndarray):
            leaf.flags.writeable = False
    return tree
