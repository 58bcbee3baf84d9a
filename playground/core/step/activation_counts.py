"""The hidden activations' gradients, counted by magnitude inside the step's program.

Rule, per activation gradient g (any float dtype, read as float32)::

    log2 histogram   entries with 2^k <= |g| < 2^(k+1) in bin k - LOG2_LOW, for the finite
                     nonzero entries; k below LOG2_LOW or from LOG2_HIGH on lands in the
                     first or the last bin
    zeros            entries equal to 0
    non-finite       entries that are inf or NaN

A block recipe's histogram counts each entry in its block's units instead of |g|: the float32
number the recipe's quantizer would round into its element format if it stored g as it stores a
backward operand of a product that contracts over the features, in blocks of 1 x block along the
last axis (``core.recipes.block_quantize.units``; the magnitude figure's convention for the
parameter gradients, ``core.recipes.block_places``). A nonzero entry whose units are 0 (its
block's scale flushed to zero) lands in the first bin, below every float32 binade (which |g|
never reaches): it would be stored as 0. Zeros and non-finite entries are those of g itself.

One int32 row per activation: the histogram's LOG2_HIGH - LOG2_LOW bins, then the two counts
(``core.step.report.ActivationReport`` reads them back).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from playground.core.recipes.block_formats import BlockRecipe
from playground.core.recipes.block_quantize import units

# The log2 binades counted, from below float32's smallest subnormal (2^-149) to past its largest
# value (2^128): every finite nonzero value has a bin.
LOG2_LOW, LOG2_HIGH = -150, 128


def activation_counts(grads: tuple[jax.Array, ...], recipe: BlockRecipe | None = None) -> jax.Array:
    """In a program: the (activations, bins + 2) int32 rows of the rule (in ``recipe``'s
    block units when it is given)."""
    bins = LOG2_HIGH - LOG2_LOW
    rows = []
    for grad in grads:
        values = jnp.abs(grad.astype(jnp.float32)).ravel()
        live = jnp.isfinite(values) & (values > 0)
        measured = values
        if recipe is not None:
            matrix = grad.reshape(-1, grad.shape[-1])
            measured = units(matrix, (1, recipe.block), recipe).ravel()
        _, exponent = jnp.frexp(measured)  # measured = m * 2^exponent with m in [0.5, 1)
        index = jnp.where(measured > 0, jnp.clip(exponent - 1 - LOG2_LOW, 0, bins - 1), 0)
        histogram = jnp.bincount(index, weights=live.astype(jnp.int32), length=bins)
        zeros = jnp.sum(values == 0)
        nonfinite = jnp.sum(~jnp.isfinite(values))
        rows.append(jnp.concatenate([histogram.astype(jnp.int32), jnp.stack([zeros, nonfinite])]))
    if not rows:
        return jnp.zeros((0, bins + 2), jnp.int32)
    return jnp.stack(rows).astype(jnp.int32)
