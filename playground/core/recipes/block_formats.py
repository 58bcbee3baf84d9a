"""Block-scaled recipes: their formats, block shapes and scale rules, one frozen record each.

Rule: a block-scaled tensor stores ``value = element * block_scale * tensor_scale``, where
``element`` is in a narrow format (E4M3 or E2M1) and one ``block_scale`` is shared by a block of
consecutive values along the matmul's contraction dimension (or by a square tile of a weight).
``amax`` is the largest |value| of the block (of the tensor for ``tensor_scale``); ``emax`` the
exponent of the element format's largest value (8 for E4M3, as 448 = 1.75 x 2^8)::

    mxfp8      E4M3 elements, blocks of 32, block_scale = 2^e in E8M0 (no tensor scale):
               "round_up" e = ceil(log2(amax / 448))    (the registered MXFP8: the rule of
                          TransformerEngine, cuBLAS and JAX's quantizer, so it matches both
                          peers; the block's largest value never exceeds 448)
               "ocp"      e = floor(log2 amax) - emax   (OCP MX spec v1.0, ``MXFP8_OCP``;
                          the block's top values may exceed 448 and saturate to it)
    fp8_block  E4M3 elements, 1 x 128 tiles for activations and gradients, 128 x 128 for
               weights; block_scale = amax / 448 in float32 (DeepSeek-V3; TransformerEngine's
               Float8BlockScaling with NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1: its default rounds
               the scale to a power of two)
    nvfp4      E2M1 elements, blocks of 16 (16 x 16 tiles for weights); two levels:
               tensor_scale = amax_tensor / (448 x 6) in float32,
               block_scale  = E4M3(min(amax_block / tensor_scale / 6, 448));
               gradients rounded stochastically; the weight-gradient matmul's two inputs
               rotated by a random 16 x 16 Hadamard transform first (``hadamard``)

E8M0 exponents are clipped to its range [-127, 127]; an all-zero block gets the smallest scale
(2^-127 in E8M0; 1 in float32), and its entries stay 0. A zero tensor gets tensor_scale 1.
Every format's limits are read from ml_dtypes' finfo, never typed in.

Example::

    >>> MXFP8.block, FP8_BLOCK.weight_tile, NVFP4.weight_tile
    (32, (128, 128), (16, 16))
    >>> element_facts("float8_e4m3fn").emax, element_facts("float4_e2m1fn").max
    (8, 6.0)
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp
import ml_dtypes
import numpy as np

E8M0_MIN_EXPONENT, E8M0_MAX_EXPONENT = -127, 127
SCALE_RULES = ("ocp", "round_up", "float32", "two_level")


@dataclass(frozen=True)
class ElementFacts:
    """What quantizing into one element format needs, from ml_dtypes' finfo.

    max: the largest finite value; emax: floor(log2 max); mantissa_bits: stored fraction bits;
    smallest_normal, smallest_subnormal (= 2^subnormal_exponent); overflow_edge: max plus half
    the gap above it, the magnitude from which round-to-nearest into an unbounded format would
    give more than max (a value between max and the edge rounds to max anyway: no loss).
    """

    name: str
    max: float
    emax: int
    mantissa_bits: int
    smallest_normal: float
    smallest_subnormal: float
    subnormal_exponent: int
    overflow_edge: float


@functools.cache
def element_facts(name: str) -> ElementFacts:
    """The facts of ``name`` (a format ml_dtypes knows, e.g. float8_e4m3fn, float4_e2m1fn)."""
    finfo = ml_dtypes.finfo(np.dtype(getattr(ml_dtypes, name)))
    largest = float(finfo.max)
    emax = int(np.floor(np.log2(largest)))
    gap_at_max = 2.0 ** (emax - int(finfo.nmant))
    return ElementFacts(
        name=name,
        max=largest,
        emax=emax,
        mantissa_bits=int(finfo.nmant),
        smallest_normal=float(finfo.smallest_normal),
        smallest_subnormal=float(finfo.smallest_subnormal),
        subnormal_exponent=int(np.log2(float(finfo.smallest_subnormal))),
        overflow_edge=largest + gap_at_max / 2,
    )


@dataclass(frozen=True)
class BlockRecipe:
    """One block-scaled recipe (see the module rule).

    name: the compute_dtype value it is registered as.
    element_format: the format of every quantized operand (forward and backward).
    scale_format: the format of the block scales (float8_e8m0fnu, float32, float8_e4m3fn).
    scale_rule: one of SCALE_RULES.
    block: values per 1-D block (activations, gradients; weights too when weight_tile is None).
    weight_tile: (rows, columns) of a weight's 2-D tile, or None for 1-D blocks along the
      contraction dimension of each matmul.
    stochastic_gradients: whether the gradient arriving at a matmul is rounded stochastically.
    hadamard_block: the size of the random Hadamard transform applied to the weight-gradient
      matmul's inputs when the setting asks for it; 0 for a recipe without one.
    jax_mode: the mode of ``jax.nn.get_scaled_dot_general_config`` with the same element and
      scale formats (a native forward path), or None.
    """

    name: str
    element_format: str
    scale_format: str
    scale_rule: str
    block: int
    weight_tile: tuple[int, int] | None = None
    stochastic_gradients: bool = False
    hadamard_block: int = 0
    jax_mode: str | None = None

    def __post_init__(self) -> None:
        if self.scale_rule not in SCALE_RULES:
            raise ValueError(f"scale_rule must be one of {', '.join(SCALE_RULES)}")
        element_facts(self.element_format)  # a format ml_dtypes does not know fails here

    @property
    def power_of_two_scales(self) -> bool:
        """Whether the block scales are powers of two (an E8M0 exponent)."""
        return self.scale_rule in ("ocp", "round_up")

    @property
    def two_level(self) -> bool:
        """Whether a float32 tensor scale sits above the block scales (NVFP4)."""
        return self.scale_rule == "two_level"


MXFP8 = BlockRecipe(
    "mxfp8", "float8_e4m3fn", "float8_e8m0fnu", "round_up", block=32, jax_mode="mxfp8"
)
# The OCP spec's scale rule, for comparison (not registered as a compute dtype).
MXFP8_OCP = dataclasses.replace(MXFP8, scale_rule="ocp")
FP8_BLOCK = BlockRecipe(
    "fp8_block", "float8_e4m3fn", "float32", "float32", block=128, weight_tile=(128, 128)
)
NVFP4 = BlockRecipe(
    "nvfp4",
    "float4_e2m1fn",
    "float8_e4m3fn",
    "two_level",
    block=16,
    weight_tile=(16, 16),
    stochastic_gradients=True,
    hadamard_block=16,
    jax_mode="nvfp4",
)
BLOCK_RECIPES = {r.name: r for r in (MXFP8, FP8_BLOCK, NVFP4)}


def e8m0_exponent(amax: Any, element_format: str, rule: str, xp: Any = jnp) -> Any:
    """The E8M0 exponent e of each block (scale 2^e) under ``rule`` ("ocp" or "round_up"),
    int32, clipped to E8M0's range; the smallest for an all-zero block. ``xp``: jax.numpy in a
    program, numpy on the host (the same float32 operations, so the same exponents, with no
    compilation per shape)."""
    facts = element_facts(element_format)
    if rule == "ocp":
        # frexp: amax = m 2^k with m in [0.5, 1), so floor(log2 amax) = k - 1, exactly.
        _, k = xp.frexp(amax)
        exponent = k - 1 - facts.emax
    else:
        # ceil(log2 r) of r = amax / max, rounded to float32's 24 bits first as the reference
        # quantizers do. With amax = m 2^k and max = mf 2^kf, r = (m / mf) 2^(k - kf), and
        # m / mf = q 2^kq is a normal float32 whatever amax is, so a tiny amax, whose r would
        # be a subnormal (flushed to zero on CPU), still gets its exponent: kq + k - kf, or one
        # less when r is a power of two (q == 0.5).
        m, k = xp.frexp(amax)
        max_mantissa, max_exponent = np.frexp(np.float32(facts.max))
        q, kq = xp.frexp(m / xp.float32(max_mantissa))
        exponent = k - int(max_exponent) + xp.where(q == 0.5, kq - 1, kq)
    exponent = xp.where(amax > 0, exponent, E8M0_MIN_EXPONENT)
    return xp.clip(exponent, E8M0_MIN_EXPONENT, E8M0_MAX_EXPONENT).astype(xp.int32)


def float32_block_scale(amax: jnp.ndarray, element_format: str) -> jnp.ndarray:
    """amax / max in float32 (1 for an all-zero block)."""
    scale = amax / jnp.float32(element_facts(element_format).max)
    return jnp.where(amax > 0, scale, jnp.float32(1))


def nvfp4_tensor_scale(amax: jnp.ndarray, element_format: str, scale_format: str) -> jnp.ndarray:
    """amax_tensor / (scale max x element max), float32; 1 for a zero or non-finite amax; at
    least float32's smallest normal (a subnormal scale is flushed to zero on CPU, and a tensor
    divided by zero would read as saturated)."""
    product = element_facts(scale_format).max * element_facts(element_format).max
    scale = jnp.maximum(amax / jnp.float32(product), jnp.finfo(jnp.float32).tiny)
    return jnp.where((amax > 0) & jnp.isfinite(amax), scale, jnp.float32(1))
