"""The memory ledger: what a trainer of this model keeps, per parameter and in total, by recipe.

Rule (the ZeRO paper's convention, Rajbhandari et al. 2020, section 3.1: mixed precision with
Adam keeps 2 + 2 + 4 + 4 + 4 = 16 bytes per parameter). ``bytes(f)`` is format f's bit width
(``core.formats.dtypes``) / 8; P the model's parameter entries, K those of its matmuls' kernels::

    per parameter entry
      working_weights    bytes(cast dtype), the copy the step computes with; 0 when it is
                         float32, where the float32 master serves (the scaled recipes)
      gradients          bytes(cast dtype), the gradient the backward pass produces
      master_weights     bytes(float32)
      optimizer_state    state arrays (sgd 0, momentum 1, adam 2) x bytes(moments dtype): the
                         config's ``moments_dtype`` where it has one, else float32
    per kernel, what a quantizing recipe adds (``core.recipes``)
      quantized_weights  K x the forward format's bits / 8 (rounded up per kernel: two E2M1
                         elements share a byte)
      weight_scales      per-tensor float8: one float32 scale; a block recipe: one scale in its
                         scale format per tile of ``block_matmul.weight_tile`` (forward), and a
                         two-level recipe's float32 tensor scale
      transposed_weights where the backward pass's tile differs from the forward's (1-D blocks
                         along the contraction, MXFP8): a second copy and its block scales
      amax_history       delayed float8 scaling: amax_history float32 amaxes per role
                         (input, kernel, gradient) of each matmul
    activations, per batch row (this batch: N rows; a row is one token)
      each dense layer's input, kept for its weight gradient: in the matmul's input dtype, or
      as a quantizing recipe keeps it (its forward format; float8's one float32 scale, a block
      recipe's scales of the weight gradient's b x 1 blocks along the batch and a two-level
      recipe's tensor scale); each hidden layer's pre-activation in the activation's dtype
      (the model's ``Layout.kept``: a transformer's attention scores and weights in the
      attention dtype, its SwiGLU's g and u in the activation dtype). A layer norm's statistics
      are not counted.

A user's own size scales it: ``param_count`` parameters at this model's bytes per parameter,
``tokens_per_batch`` tokens at this model's activation bytes per token (its widths); 0 means
this model's own count and this batch's N rows.

Example::

    >>> from playground.core.recipes.registry import RECIPES
    >>> from playground.core.settings.settings import StepConfig
    >>> ledger = memory_ledger(StepConfig(optimizer="adam"), RECIPES["bfloat16"])
    >>> ledger.bytes_per_param, ledger.parts["optimizer_state"] / ledger.parameters
    (16.0, 8.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from playground.core.bounds import Bounds, ConfigError
from playground.core.formats.dtypes import FORMATS, dtype_facts
from playground.core.model.models import MODELS
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.recipes.block_matmul import weight_tile
from playground.core.recipes.float8 import ROLES
from playground.core.recipes.registry import FLOAT32, Recipe
from playground.core.settings.cost import parameter_entries
from playground.core.settings.settings import StepConfig
from playground.core.step.policy import policy_for

PARTS = (
    "working_weights",
    "gradients",
    "master_weights",
    "optimizer_state",
    "quantized_weights",
    "weight_scales",
    "transposed_weights",
    "amax_history",
)
# The fp8_scaling choice that keeps an amax history between steps.
DELAYED = "delayed"
# The two inputs that scale the ledger to a user's own model; 0 means this model's own.
SIZE_FIELDS = {
    "param_count": Bounds(
        "parameter count",
        0,
        10**13,
        "Your model's parameters (0: this model's).",
        integer=True,
    ),
    "tokens_per_batch": Bounds(
        "tokens per batch",
        0,
        2**32,
        "Tokens (batch rows) of your batch (0: this batch's N).",
        integer=True,
    ),
}


def format_bits(name: str, field: str = "moments_dtype") -> int:
    """The bit width of format ``name`` (one of FORMATS); ConfigError naming ``field`` else."""
    if name not in FORMATS:
        raise ConfigError(field, f"{field} has no bit width in the dtype registry: {name!r}")
    return dtype_facts(name).bits


def _bytes(entries: int, fmt: str) -> int:
    """Bytes of ``entries`` values of ``fmt``, packed (rounded up to a whole byte)."""
    return math.ceil(entries * format_bits(fmt, "compute_dtype") / 8)


def _tiles(shape: tuple[int, int], tile: tuple[int, int]) -> int:
    """Tiles of ``tile`` covering ``shape`` (a partial one at each edge, as zero-padding has)."""
    return math.ceil(shape[0] / tile[0]) * math.ceil(shape[1] / tile[1])


def _block_copy(shape: tuple[int, int], tile: tuple[int, int], recipe: Recipe) -> tuple[int, int]:
    """(element bytes, block-scale bytes) of one block-quantized copy of a ``shape`` tensor."""
    spec = recipe.block
    return _bytes(shape[0] * shape[1], spec.element_format), _bytes(
        _tiles(shape, tile), spec.scale_format
    )


def _kernel_parts(shape: tuple[int, int], recipe: Recipe, config: StepConfig) -> dict[str, int]:
    """What ``recipe`` keeps of one kernel beyond its master (see the module rule)."""
    if not recipe.quantizes:
        return {}
    tensor_scale = _bytes(1, FLOAT32)
    if recipe.block is None:  # per-tensor float8: one copy, one scale
        parts = {
            "quantized_weights": _bytes(shape[0] * shape[1], recipe.forward_format),
            "weight_scales": tensor_scale,
        }
        if config.fp8_scaling == DELAYED and DELAYED in recipe.scalings:
            parts["amax_history"] = len(ROLES) * _bytes(config.amax_history, FLOAT32)
        return parts
    forward, backward = weight_tile(recipe.block, True), weight_tile(recipe.block, False)
    elements, scales = _block_copy(shape, forward, recipe)
    parts = {"quantized_weights": elements, "weight_scales": scales}
    if recipe.block.two_level:
        parts["weight_scales"] += tensor_scale
    if backward != forward:
        parts["transposed_weights"] = sum(_block_copy(shape, backward, recipe))
    return parts


def activation_bytes(config: StepConfig, recipe: Recipe) -> int:
    """Bytes of the activations the backward pass keeps for ``config``'s batch (the rule's)."""
    policy = policy_for(config.replace(compute_dtype=recipe.name))
    choice = config.model_choice
    layout = MODELS[choice.name].layout(choice, config.d_in, config.d_out)
    rows = config.n
    kept = 0
    for fan_in, _ in layout.dense:
        entries = rows * fan_in
        if not recipe.quantizes:
            kept += _bytes(entries, policy.op_dtype("matmul"))
        elif recipe.block is None:
            kept += _bytes(entries, recipe.forward_format) + _bytes(1, FLOAT32)
        else:
            column = (recipe.block.block, 1)  # the weight gradient's blocks along the batch
            kept += sum(_block_copy((rows, fan_in), column, recipe))
            kept += _bytes(1, FLOAT32) if recipe.block.two_level else 0
    kept += sum(_bytes(rows * entries, policy.op_dtype(kind)) for kind, entries in layout.kept)
    return kept


def parts_json(parts: dict[str, float], parameters: int) -> dict[str, dict[str, float]]:
    """A ledger's parts as JSON: each part's bytes and bytes per parameter."""
    return {
        name: {"bytes": value, "bytes_per_param": value / parameters}
        for name, value in parts.items()
    }


@dataclass(frozen=True)
class MemoryLedger:
    """One recipe's ledger (see the module rule): ``parts`` in bytes for ``parameters``
    parameter entries, ``activations`` in bytes for ``tokens`` batch rows."""

    recipe: str
    parameters: int
    tokens: int
    parts: dict[str, float]
    activations: float

    @property
    def bytes_per_param(self) -> float:
        return sum(self.parts.values()) / self.parameters

    @property
    def parameter_bytes(self) -> float:
        return sum(self.parts.values())

    @property
    def total_bytes(self) -> float:
        return self.parameter_bytes + self.activations

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: each part's bytes and bytes per parameter, then the totals."""
        return {
            "recipe": self.recipe,
            "bytes_per_param": self.bytes_per_param,
            "parts": parts_json(self.parts, self.parameters),
            "parameters": self.parameters,
            "parameter_bytes": self.parameter_bytes,
            "tokens": self.tokens,
            "activation_bytes": self.activations,
            "activation_bytes_per_token": self.activations / self.tokens,
            "total_bytes": self.total_bytes,
        }


def memory_ledger(
    config: StepConfig, recipe: Recipe, param_count: int = 0, tokens_per_batch: int = 0
) -> MemoryLedger:
    """The ledger of ``recipe`` for ``config``'s model and batch, scaled to ``param_count``
    parameters and ``tokens_per_batch`` tokens when they are not 0 (see the module rule)."""
    param_count = SIZE_FIELDS["param_count"].check("param_count", param_count)
    tokens_per_batch = SIZE_FIELDS["tokens_per_batch"].check("tokens_per_batch", tokens_per_batch)
    choice = config.model_choice
    entries = parameter_entries(choice, config.d_in, config.d_out)
    low = recipe.cast_dtype
    moments = getattr(config, "moments_dtype", FLOAT32)
    own = {
        "working_weights": _bytes(entries, low) if low != FLOAT32 else 0,
        "gradients": _bytes(entries, low),
        "master_weights": _bytes(entries, FLOAT32),
        "optimizer_state": OPTIMIZERS[config.optimizer].state_arrays
        * math.ceil(entries * format_bits(moments) / 8),
    } | dict.fromkeys(PARTS[4:], 0)
    for shape in MODELS[choice.name].layout(choice, config.d_in, config.d_out).dense:
        for name, value in _kernel_parts(shape, recipe, config).items():
            own[name] += value
    parameters = param_count or entries
    tokens = tokens_per_batch or config.n
    return MemoryLedger(
        recipe=recipe.name,
        parameters=parameters,
        tokens=tokens,
        parts={name: value * parameters / entries for name, value in own.items()},
        activations=activation_bytes(config, recipe) * tokens / config.n,
    )
