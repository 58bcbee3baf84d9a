"""What the matmuls' accumulation costs in accuracy: the first layer's output error, and how it
grows with D_in.

Rule, for a config with ``accumulation`` A (``core.formats.accumulation``)::

    x, W      = the first layer's operands as the step casts them (the matmul dtype: the
                compute dtype of a plain recipe, float32 for a quantizing one, before its
                quantization), on the batch's first OUTPUT_ROWS rows
    exact     = x @ W in float64
    output_rel_error         = ||A(x @ W) - exact|| / ||exact||, the accumulator's float32
                               result (before the output's cast to the matmul dtype)
    float32_output_rel_error = the same for XLA's own float32 accumulation

and, when A is emulated, on a probe (GROWTH_ROWS x GROWTH_WIDTH x GROWTH_COLUMNS standard
normals from the data seed, cast to the matmul dtype): the same error at each D_in of
GROWTH_D_IN, the first D_in columns and rows of the probe, without promotion and with
promotion every ``growth_interval`` products (the config's interval, or DeepSeek-V3's 128 when
it is 0). One pass over the probe's 4096 columns gives every D_in: the accumulator's value
after the first D_in products is the product of the first D_in.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.formats.accumulation import (
    CHUNK,
    Accumulation,
    accumulate,
    matmul,
    rel_error,
)
from playground.core.step.compiled import program

OUTPUT_ROWS = 128
GROWTH_ROWS, GROWTH_WIDTH, GROWTH_COLUMNS = 16, 4096, 16
GROWTH_D_IN = (128, 256, 512, 1024, 2048, 4096)
DEEPSEEK_INTERVAL = 128


@dataclass(frozen=True)
class AccumulationReport:
    """The rule's figures: the setting, the first layer's two errors (over ``rows`` rows), and
    (emulated only; else empty) the growth: ``growth_error[i]`` and ``growth_promoted_error[i]``
    at ``GROWTH_D_IN[i]``, the latter promoted every ``growth_interval`` products."""

    accumulation: str
    promotion_interval: int
    output_rel_error: float
    float32_output_rel_error: float
    rows: int
    growth_interval: int = 0
    growth_error: tuple[float, ...] = ()
    growth_promoted_error: tuple[float, ...] = ()


# Both compiled once per (shapes, dtype, accumulation), kept in the page's table of programs.
@program(static_argnames=("dtype", "accumulations"))
def _accumulator_outputs(x, kernel, *, dtype: str, accumulations: tuple[Accumulation, ...]):
    """The operands cast to ``dtype`` (returned widened to float32, exactly) and their product
    under each accumulation: one compiled call, no eager casts."""
    lhs, rhs = x.astype(dtype), kernel.astype(dtype)
    outputs = tuple(matmul(lhs, rhs, accumulation) for accumulation in accumulations)
    return lhs.astype(jnp.float32), rhs.astype(jnp.float32), outputs


@program(static_argnames=("accumulation",))
def _prefix_products(lhs, rhs, *, accumulation: Accumulation) -> jax.Array:
    return accumulate(lhs, rhs, accumulation, prefixes=True)


def _exact(lhs, rhs) -> np.ndarray:
    return np.asarray(lhs, np.float64) @ np.asarray(rhs, np.float64)


def _growth(accumulation: Accumulation, dtype: str, seed: int) -> tuple[int, tuple, tuple]:
    """(interval, errors without promotion, errors promoted) at GROWTH_D_IN (see the rule)."""
    rng = np.random.default_rng(seed)
    shape = (GROWTH_ROWS, GROWTH_WIDTH), (GROWTH_WIDTH, GROWTH_COLUMNS)
    lhs, rhs = (jnp.asarray(rng.standard_normal(s), jnp.float32).astype(dtype) for s in shape)
    chunks = GROWTH_WIDTH // CHUNK
    per_chunk = np.einsum(
        "nck,ckm->cnm",
        np.asarray(lhs, np.float64).reshape(GROWTH_ROWS, chunks, CHUNK),
        np.asarray(rhs, np.float64).reshape(chunks, CHUNK, GROWTH_COLUMNS),
    )
    exact = np.cumsum(per_chunk, axis=0)
    interval = accumulation.promotion_interval or DEEPSEEK_INTERVAL
    curves = []
    for every in (0, interval):
        rule = Accumulation(accumulation.name, every)
        prefixes = np.asarray(_prefix_products(lhs, rhs, accumulation=rule))
        index = [d_in // CHUNK - 1 for d_in in GROWTH_D_IN]
        curves.append(tuple(rel_error(prefixes[i], exact[i]) for i in index))
    return interval, curves[0], curves[1]


def accumulation_report(
    config, x: np.ndarray, kernel: np.ndarray, matmul_dtype: str
) -> AccumulationReport:
    """The rule's figures for ``config`` (a StepConfig), its batch's x and its first kernel."""
    accumulation = Accumulation(config.accumulation, config.promotion_interval).normalized()
    rules = tuple(dict.fromkeys((accumulation, Accumulation())))
    lhs, rhs, outputs = _accumulator_outputs(
        x[:OUTPUT_ROWS], kernel, dtype=matmul_dtype, accumulations=rules
    )
    exact = _exact(lhs, rhs)
    errors = [rel_error(np.asarray(output), exact) for output in outputs]
    growth = {}
    if accumulation.emulated:
        interval, plain, promoted = _growth(accumulation, matmul_dtype, config.data_seed)
        growth = {
            "growth_interval": interval,
            "growth_error": plain,
            "growth_promoted_error": promoted,
        }
    return AccumulationReport(
        accumulation=config.accumulation,
        promotion_interval=accumulation.promotion_interval,
        output_rel_error=errors[0],
        float32_output_rel_error=errors[-1],
        rows=int(lhs.shape[0]),
        **growth,
    )
