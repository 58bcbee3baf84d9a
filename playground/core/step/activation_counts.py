"""The hidden activations' gradients, counted by magnitude inside the step's program.

Rule, per activation gradient g (any float dtype, read as float32)::

    log2 histogram   entries with 2^k <= |g| < 2^(k+1) in bin k - LOG2_LOW, for the finite
                     nonzero entries; k below LOG2_LOW or from LOG2_HIGH on lands in the
                     first or the last bin
    zeros            entries equal to 0
    non-finite       entries that are inf or NaN

One int32 row per activation: the histogram's LOG2_HIGH - LOG2_LOW bins, then the two counts
(``core.step.report.ActivationReport`` reads them back).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

# The log2 binades counted, from below float32's smallest subnormal (2^-149) to past its largest
# value (2^128): every finite nonzero value has a bin.
LOG2_LOW, LOG2_HIGH = -150, 128


def activation_counts(grads: tuple[jax.Array, ...]) -> jax.Array:
    """In a program: the (activations, bins + 2) int32 rows of the rule."""
    bins = LOG2_HIGH - LOG2_LOW
    rows = []
    for grad in grads:
        values = jnp.abs(grad.astype(jnp.float32)).ravel()
        live = jnp.isfinite(values) & (values > 0)
        _, exponent = jnp.frexp(values)  # values = m * 2^exponent with m in [0.5, 1)
        index = jnp.clip(exponent - 1 - LOG2_LOW, 0, bins - 1)
        histogram = jnp.bincount(index, weights=live.astype(jnp.int32), length=bins)
        zeros = jnp.sum(values == 0)
        nonfinite = jnp.sum(~jnp.isfinite(values))
        rows.append(jnp.concatenate([histogram.astype(jnp.int32), jnp.stack([zeros, nonfinite])]))
    if not rows:
        return jnp.zeros((0, bins + 2), jnp.int32)
    return jnp.stack(rows).astype(jnp.int32)
