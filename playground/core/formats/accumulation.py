"""How a matmul accumulates its products: the accumulator's precision, emulated on CPU.

Rule, for ``out = lhs @ rhs`` with contraction length K under ``Accumulation(name, interval)``
(B: the accumulator's significant bits, ``ACCUMULATOR_BITS[name]``; C = ``CHUNK``)::

    the K products are taken in order, in chunks of C (the last one zero-padded)
    partial_j = the float32 sum of chunk j's products (one tensor-core instruction's worth:
                an FP8 WGMMA on Hopper sums 32 products of K at a time)
    low       = round_B(low + partial_j)         the float32 sum rounded to B significant bits
                                                 (round to nearest even, ``round_significand``)
    promotion, when interval > 0: after every interval / C chunks, total += low (float32) and
               low = 0, as DeepSeek-V3 copies the tensor core's partial sums to float32
               registers every 128 products
    out       = total + low                      (float32), then cast to the operands' dtype

``float32`` (B = 24, the default and the exercise's) is no emulation: the matmul stays XLA's
own, so every number is today's bit for bit. ``bfloat16`` keeps 8 bits; ``14_bits`` keeps the
about 14 bits that DeepSeek-V3 measured for FP8 GEMMs on H800 GPUs. The products themselves
are exact in float32 for bfloat16, float16 and float8 operands (their significands have at
most 11 bits); the accumulator loses what its B bits cannot hold of each running sum.

A matmul under an emulated accumulation (``accumulated_matmul``) has a custom VJP whose two
backward matmuls (d_lhs = g @ rhs^T over M, d_rhs = lhs^T @ g over N) accumulate the same way,
so every matmul of a step follows the setting. The emulation is a ``lax.scan`` over the chunks,
one (N, C) @ (C, M) product and a rounding of the (N, M) running sum per chunk: compiled once
per shape, and a small factor over a plain matmul (``bench/bench_accumulation.py``).

Example::

    >>> import numpy as np
    >>> float(round_significand(np.float32(1 + 2**-9), 8))  # a tie, to even: 1
    1.0
    >>> Accumulation("14_bits", 128).bits, Accumulation().emulated
    (14, False)
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

# The accumulator's significant bits (the implicit leading bit included), per setting.
ACCUMULATOR_BITS = {"float32": 24, "bfloat16": 8, "14_bits": 14}
ACCUMULATIONS = tuple(ACCUMULATOR_BITS)
FLOAT32_BITS = ACCUMULATOR_BITS["float32"]
# Products summed in float32 before the running sum is rounded (a promotion interval is a
# multiple of it).
CHUNK = 32
PROMOTION_MAX = 4096
HIGHEST = jax.lax.Precision.HIGHEST


@dataclass(frozen=True)
class Accumulation:
    """One accumulation rule (the module rule): frozen and hashable, a static argument.

    ``name`` in ACCUMULATIONS; ``promotion_interval``: 0 (never) or a multiple of CHUNK up to
    PROMOTION_MAX. ``float32`` promotes nothing (its sums are float32 already), so
    ``normalized`` drops its interval and a float32 step never recompiles for it.
    """

    name: str = "float32"
    promotion_interval: int = 0

    def __post_init__(self) -> None:
        if self.name not in ACCUMULATOR_BITS:
            raise ValueError(
                f"accumulation must be one of {', '.join(ACCUMULATIONS)}; got {self.name!r}"
            )
        interval = self.promotion_interval
        if not 0 <= interval <= PROMOTION_MAX or interval % CHUNK:
            raise ValueError(
                f"promotion_interval must be 0 or a multiple of {CHUNK} in [0, {PROMOTION_MAX}]; "
                f"got {interval!r}"
            )

    @property
    def bits(self) -> int:
        return ACCUMULATOR_BITS[self.name]

    @property
    def emulated(self) -> bool:
        """Whether its matmuls run the emulation (False: XLA's own float32 accumulation)."""
        return self.bits < FLOAT32_BITS

    def normalized(self) -> Accumulation:
        return self if self.emulated else Accumulation()


FLOAT32_ACCUMULATION = Accumulation()


def round_significand(values: jax.Array, bits: int) -> jax.Array:
    """float32 ``values`` rounded to nearest even at ``bits`` significant bits (1 to 24), with
    integer operations on the float32 words: add half a unit of the kept last bit (less one,
    plus that bit itself, so a tie goes to even) and clear the dropped bits. A carry out of the
    significand raises the exponent (past float32's largest, to inf); inf and NaN stay as they
    are; subnormals round at the same bit positions."""
    values = jnp.asarray(values, jnp.float32)
    dropped = FLOAT32_BITS - bits
    if dropped == 0:
        return values
    words = jax.lax.bitcast_convert_type(values, jnp.uint32)
    kept_last = (words >> dropped) & jnp.uint32(1)
    half = jnp.uint32((1 << (dropped - 1)) - 1)
    mask = jnp.uint32((0xFFFFFFFF << dropped) & 0xFFFFFFFF)
    rounded = jax.lax.bitcast_convert_type((words + half + kept_last) & mask, jnp.float32)
    return jnp.where(jnp.isfinite(values), rounded, values)


def _chunked(values: jax.Array, axis: int) -> jax.Array:
    """``values`` (2-D) zero-padded along ``axis`` to whole chunks, chunk index first:
    (chunks, rows, CHUNK) for axis 1, (chunks, CHUNK, columns) for axis 0."""
    length = values.shape[axis]
    pad = [(0, 0), (0, 0)]
    pad[axis] = (0, -length % CHUNK)
    padded = jnp.pad(values, pad)
    chunks = padded.shape[axis] // CHUNK
    if axis == 1:
        return padded.reshape(padded.shape[0], chunks, CHUNK).transpose(1, 0, 2)
    return padded.reshape(chunks, CHUNK, padded.shape[1])


def accumulate(
    lhs: jax.Array, rhs: jax.Array, accumulation: Accumulation, prefixes: bool = False
) -> jax.Array:
    """(N, K) @ (K, M) in float32 by the module rule. With ``prefixes``, every chunk's result
    too: (chunks, N, M), entry j the product of the first (j + 1) x CHUNK columns of lhs and
    rows of rhs as the accumulator holds it then (the last entry is the product)."""
    lhs_chunks = _chunked(lhs.astype(jnp.float32), 1)
    rhs_chunks = _chunked(rhs.astype(jnp.float32), 0)
    every = accumulation.promotion_interval // CHUNK
    zeros = jnp.zeros((lhs.shape[0], rhs.shape[1]), jnp.float32)

    def add_chunk(carry, operands):
        low, total, index = carry
        partial = jnp.dot(*operands, precision=HIGHEST, preferred_element_type=jnp.float32)
        low = round_significand(low + partial, accumulation.bits)
        if every:
            promote = (index + 1) % every == 0
            total = jnp.where(promote, total + low, total)
            low = jnp.where(promote, 0.0, low)
        return (low, total, index + 1), (total + low if prefixes else None)

    start = (zeros, zeros, jnp.int32(0))
    (low, total, _), steps = jax.lax.scan(add_chunk, start, (lhs_chunks, rhs_chunks))
    return steps if prefixes else total + low


@functools.partial(jax.custom_vjp, nondiff_argnums=(2,))
def accumulated_matmul(lhs: jax.Array, rhs: jax.Array, accumulation: Accumulation) -> jax.Array:
    """(N, K) @ (K, M) by the module rule, in the operands' result dtype; its backward's two
    matmuls accumulate by the same rule."""
    return _forward(lhs, rhs, accumulation)[0]


def _forward(lhs, rhs, accumulation):
    out = accumulate(lhs, rhs, accumulation).astype(jnp.result_type(lhs, rhs))
    return out, (lhs, rhs)


def _backward(accumulation, residuals, d_out):
    lhs, rhs = residuals
    d_lhs = accumulate(d_out, rhs.T, accumulation).astype(lhs.dtype)
    d_rhs = accumulate(lhs.T, d_out, accumulation).astype(rhs.dtype)
    return d_lhs, d_rhs


accumulated_matmul.defvjp(_forward, _backward)


def matmul(a: jax.Array, b: jax.Array, accumulation: Accumulation | None) -> jax.Array:
    """a @ b in float32: XLA's own at the highest precision, or by ``accumulation`` when it is
    emulated (a quantizing recipe's products; their backward rules are the recipe's own)."""
    if accumulation is None or not accumulation.emulated:
        return jnp.dot(a, b, precision=HIGHEST, preferred_element_type=jnp.float32)
    return accumulate(a, b, accumulation)


def accumulating_dot_general(
    lhs,
    rhs,
    dimension_numbers,
    precision=None,
    preferred_element_type=None,
    out_sharding=None,
    *,
    accumulation: Accumulation,
):
    """``nnx.Linear``'s dot_general under an emulated ``accumulation`` (a 2-D batch times a
    kernel, the one contraction Linear does here)."""
    del precision, preferred_element_type, out_sharding  # the accumulation decides
    if lhs.ndim != 2 or tuple(map(tuple, dimension_numbers[0])) != ((1,), (0,)):
        raise ValueError("the accumulating matmul takes a 2-D batch times a kernel")
    return accumulated_matmul(lhs, rhs, accumulation)


def rel_error(values: np.ndarray, exact: np.ndarray) -> float:
    """||values - exact|| / ||exact|| in float64 (NaN when exact is all zero)."""
    exact = np.asarray(exact, np.float64)
    norm = float(np.linalg.norm(exact))
    difference = float(np.linalg.norm(np.asarray(values, np.float64) - exact))
    return difference / norm if norm > 0 else float("nan")
