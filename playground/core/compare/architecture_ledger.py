"""What training a transformer keeps on one GPU under each recipe, as TransformerEngine stores it.

Rule: one GPU holds everything (no tensor, sequence or pipeline parallelism, no ZeRO sharding).
P: the architecture's parameters (``core.compare.architecture``); W: the working dtype, the
recipe's own for a plain cast and bfloat16 for a quantizing recipe (TransformerEngine's
``params_dtype`` as Megatron-LM's ``--bf16`` sets it); bytes(f): format f's bits / 8; Q: the
weights a quantizing recipe quantizes (a layer's four GEMMs), each (in, out) held n times::

    working_weights    P x bytes(W)              kept next to the quantized copies
    quantized_copies   per weight of Q: two copies in the recipe's forward format, rowwise for
                       the forward (contracting ``in``) and columnwise for the input gradient
                       (contracting ``out``): per-tensor FP8's and FP8 blocks' transposes
                       (Hopper's FP8 GEMMs take only TN layouts), MXFP8's and NVFP4's
                       columnwise copies, scaled along the other axis
    scales_and_amax    each copy's scales: per tensor, one float32 scale; a block recipe, one
                       scale (its scale format) per tile of ``block_matmul.weight_tile``
                       (forward for rowwise, backward for columnwise, unpadded) and a two-level
                       recipe's float32 tensor scale. Per GEMM of a per-tensor recipe,
                       TransformerEngine's scaling state: len(TE_ROLES) x (history + 2) x 4
                       bytes (an amax history and a scale and its inverse per role; history =
                       ``amax_history`` under delayed scaling, 1 otherwise): a constant per GEMM
    gradients          P x bytes(W)              the weight-gradient GEMM writes W
    master_weights     P x 4                     float32
    optimizer_state    P x state arrays (sgd 0, momentum 1, adam 2) x bytes(moments_dtype)
    activations        L x (a layer's terms) + the output layer's terms, or with full
                       recomputation L x (a layer's input) + one layer's terms (its
                       recomputation) + the output layer's (``core.compare.activations``),
                       each term stored by its kind:
                         high            bytes(W)
                         gemm input      bytes(W); a quantizing recipe keeps the forward
                                         format's copy TransformerEngine saves for the weight
                                         gradient and its scales: per tensor one float32, a
                                         block recipe one per ``block`` tokens of a feature
                                         (and a two-level recipe's float32 tensor scale)
                         quantized copy  0; a quantizing recipe, as a gemm input
                         mask            1 byte     float32  4 bytes

Attention runs in W (TransformerEngine's default: no FP8 attention). Not counted: the backward
pass's transient buffers (activation gradients, workspaces, the logits' gradient), padding of
block scales, and a norm's statistics.

Example::

    >>> from playground.core.compare.architecture import architecture
    >>> from playground.core.recipes.registry import RECIPES
    >>> model = architecture({})  # a 1B Llama-like model
    >>> setup = TrainingSetup(sequence_length=4096, micro_batch=1, optimizer="adam")
    >>> architecture_ledger(model, RECIPES["bfloat16"], setup).bytes_per_param
    16.0
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from playground.core.bounds import Bounds
from playground.core.compare.activations import (
    FLOAT32,
    GEMM_INPUT,
    HIGH,
    MASK,
    QUANTIZED_COPY,
    Term,
    layer_input,
    layer_terms,
    output_terms,
)
from playground.core.compare.architecture import Architecture, Weight, check_flag
from playground.core.compare.memory import parts_json
from playground.core.formats.dtypes import dtype_facts
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.recipes.block_matmul import weight_tile
from playground.core.recipes.registry import FLOAT32 as MASTER_DTYPE
from playground.core.recipes.registry import RECIPES, Recipe
from playground.core.settings.settings import settings

# A quantizing recipe's working dtype (TransformerEngine's params_dtype under Megatron's --bf16).
QUANTIZED_WORKING_DTYPE = "bfloat16"
# The slots of TransformerEngine's per-tensor scaling state per GEMM (its fp8_meta): forward
# input, weight and output; backward output gradient and input gradient.
TE_ROLES = ("input", "weight", "output", "grad_output", "grad_input")
# The fp8_scaling value that keeps an amax history.
DELAYED = "delayed"
PARTS = (
    "working_weights",
    "quantized_copies",
    "scales_and_amax",
    "gradients",
    "master_weights",
    "optimizer_state",
)
ACTIVATION_PARTS = ("layers", "recomputed_layer", "output_layer")
SETUP_FIELDS = {
    "sequence_length": Bounds("sequence length s", 1, 2**20, "Tokens per sequence.", integer=True),
    "micro_batch": Bounds(
        "micro-batch b", 1, 2**12, "Sequences per forward and backward pass.", integer=True
    ),
}
SETUP_FLAGS = {
    "recompute": ("activation checkpointing", "Full recomputation: keep each layer's input."),
    "flash_attention": ("flash attention", "Attention keeps no s x s scores."),
}
# The settings of the step a ledger reads (each checked by the settings table).
SETUP_SETTINGS = ("optimizer", "moments_dtype", "fp8_scaling", "amax_history")


@dataclass(frozen=True)
class TrainingSetup:
    """How the architecture trains: one micro-batch of ``micro_batch`` sequences of
    ``sequence_length`` tokens, full recomputation or none, flash attention or not; the
    optimizer, its state's dtype and per-tensor FP8's scaling as the step's settings of those
    names. Every field checked on creation (ConfigError naming it)."""

    sequence_length: int = 4096
    micro_batch: int = 1
    recompute: bool = False
    flash_attention: bool = True
    optimizer: str = "adam"
    moments_dtype: str = "float32"
    fp8_scaling: str = DELAYED
    amax_history: int = 1024

    def __post_init__(self) -> None:
        table = settings()
        for name in SETUP_SETTINGS:
            object.__setattr__(self, name, table[name].check(name, getattr(self, name)))
        for name, bounds in SETUP_FIELDS.items():
            object.__setattr__(self, name, bounds.check(name, getattr(self, name)))
        for name, (label, _) in SETUP_FLAGS.items():
            check_flag(name, getattr(self, name), label)

    @property
    def tokens(self) -> int:
        return self.sequence_length * self.micro_batch

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _bytes(entries: int, fmt: str) -> int:
    """Bytes of ``entries`` values of ``fmt``, packed (rounded up to a whole byte)."""
    return math.ceil(entries * dtype_facts(fmt).bits / 8)


def _tiles(shape: tuple[int, int], tile: tuple[int, int]) -> int:
    """Tiles of ``tile`` covering ``shape`` (a partial one at each edge)."""
    return math.ceil(shape[0] / tile[0]) * math.ceil(shape[1] / tile[1])


def working_dtype(recipe: Recipe) -> str:
    """W of the module rule."""
    return QUANTIZED_WORKING_DTYPE if recipe.quantizes else recipe.cast_dtype


def _copy_scales(shape: tuple[int, int], tile: tuple[int, int] | None, recipe: Recipe) -> int:
    """Bytes of the scales of one quantized copy of a ``shape`` tensor, blocked by ``tile``."""
    spec = recipe.block
    if spec is None:
        return _bytes(1, MASTER_DTYPE)
    return _bytes(_tiles(shape, tile), spec.scale_format) + (
        _bytes(1, MASTER_DTYPE) if spec.two_level else 0
    )


def _weight_parts(weight: Weight, recipe: Recipe, setup: TrainingSetup) -> dict[str, int]:
    """The quantized copies and scales of one quantized weight, all ``weight.count`` of them."""
    shape = weight.shape
    copies = 2 * _bytes(math.prod(shape), recipe.forward_format)
    if recipe.block is None:
        scales = 2 * _copy_scales(shape, None, recipe)
        history = setup.amax_history if setup.fp8_scaling == DELAYED else 1
        scales += len(TE_ROLES) * (history + 2) * _bytes(1, MASTER_DTYPE)
    else:
        scales = sum(
            _copy_scales(shape, weight_tile(recipe.block, forward), recipe)
            for forward in (True, False)
        )
    return {"quantized_copies": copies * weight.count, "scales_and_amax": scales * weight.count}


def term_bytes(term: Term, recipe: Recipe) -> int:
    """Bytes of one activation term under ``recipe`` (the module rule's kinds)."""
    if term.kind == MASK:
        return term.entries
    if term.kind == FLOAT32:
        return _bytes(term.entries, MASTER_DTYPE)
    high = _bytes(term.entries, working_dtype(recipe))
    if term.kind == HIGH or (term.kind == GEMM_INPUT and not recipe.quantizes):
        return high
    if term.kind == QUANTIZED_COPY and not recipe.quantizes:
        return 0
    column = None if recipe.block is None else (recipe.block.block, 1)  # along the tokens
    return _bytes(term.entries, recipe.forward_format) + _copy_scales(term.shape, column, recipe)


@dataclass(frozen=True)
class ArchitectureLedger:
    """One recipe's ledger (see the module rule): ``parts`` in bytes for ``parameters``
    parameters; ``activations`` in bytes by ACTIVATION_PARTS for ``tokens`` tokens per
    micro-batch; ``layer_terms`` one layer's bytes by term (no recomputation)."""

    recipe: str
    parameters: int
    tokens: int
    parts: dict[str, int]
    activations: dict[str, int]
    layer_terms: dict[str, int]

    @property
    def parameter_bytes(self) -> int:
        return sum(self.parts.values())

    @property
    def bytes_per_param(self) -> float:
        return self.parameter_bytes / self.parameters

    @property
    def activation_bytes(self) -> int:
        return sum(self.activations.values())

    @property
    def total_bytes(self) -> int:
        return self.parameter_bytes + self.activation_bytes

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: the parts (bytes and bytes per parameter), the activations, the totals."""
        return {
            "recipe": self.recipe,
            "bytes_per_param": self.bytes_per_param,
            "parts": parts_json(self.parts, self.parameters),
            "activations": dict(self.activations),
            "layer_activation_terms": dict(self.layer_terms),
            "parameters": self.parameters,
            "parameter_bytes": self.parameter_bytes,
            "tokens": self.tokens,
            "activation_bytes": self.activation_bytes,
            "total_bytes": self.total_bytes,
        }


def architecture_ledger(
    model: Architecture, recipe: Recipe, setup: TrainingSetup
) -> ArchitectureLedger:
    """What training ``model`` under ``recipe`` keeps, by the module rule.

    Args:
      model: the transformer (``core.compare.architecture``).
      recipe: an entry of ``core.recipes.registry.RECIPES``.
      setup: the micro-batch, recomputation, attention, optimizer and FP8 scaling.

    Returns:
      The ledger: bytes of each parameter part and of the activations.
    """
    params, working = model.parameters, working_dtype(recipe)
    state = OPTIMIZERS[setup.optimizer].state_arrays
    parts = {
        "working_weights": _bytes(params, working),
        "quantized_copies": 0,
        "scales_and_amax": 0,
        "gradients": _bytes(params, working),
        "master_weights": _bytes(params, MASTER_DTYPE),
        "optimizer_state": state * _bytes(params, setup.moments_dtype),
    }
    if recipe.quantizes:
        for weight in model.weights:
            if weight.quantized:
                for name, value in _weight_parts(weight, recipe, setup).items():
                    parts[name] += value
    terms = layer_terms(model, setup.sequence_length, setup.micro_batch, setup.flash_attention)
    one_layer = {term.name: term_bytes(term, recipe) for term in terms}
    layers = model.num_hidden_layers
    if setup.recompute:
        kept = term_bytes(layer_input(model, setup.sequence_length, setup.micro_batch), recipe)
        activations = {"layers": layers * kept, "recomputed_layer": sum(one_layer.values())}
    else:
        activations = {"layers": layers * sum(one_layer.values()), "recomputed_layer": 0}
    output = output_terms(model, setup.sequence_length, setup.micro_batch)
    activations["output_layer"] = sum(term_bytes(term, recipe) for term in output)
    return ArchitectureLedger(
        recipe=recipe.name,
        parameters=params,
        tokens=setup.tokens,
        parts=parts,
        activations=activations,
        layer_terms=one_layer,
    )


@dataclass(frozen=True)
class ArchitectureMemory:
    """Every registered recipe's ledger of ``model`` under ``setup``, in the registry's order."""

    model: Architecture
    setup: TrainingSetup
    ledgers: tuple[ArchitectureLedger, ...]


def architecture_memory(model: Architecture, setup: TrainingSetup) -> ArchitectureMemory:
    """Every registered recipe's ledger (``architecture_ledger``), in the registry's order."""
    ledgers = tuple(architecture_ledger(model, entry, setup) for entry in RECIPES.values())
    return ArchitectureMemory(model, setup, ledgers)
