"""The cost model: how much work and memory one request of each endpoint takes, and its caps.

Rule: every endpoint's request is priced from its settings before any JAX code runs, and one
over a cap is refused with a ConfigError that names the field, the cap and what fits.

    pass work   N x the model's multiply-adds per row (``ModelSpec.work``: its dense matmuls'
                fan_in x fan_out, plus a transformer's attention contractions), times the recipe's
                ``work_factor`` (float8 scales, clips and casts every tensor) and, under an
                emulated ``accumulation``, ACCUMULATION_WORK_FACTOR, plus the
                optimizer's element-wise work on its state (``OptimizerSpec.state_arrays`` per
                parameter) over every parameter entry, plus ``operation_work``: N x (a layer
                norm's NORM_ELEMENTWISE per normalised entry + a softmax cross-entropy's
                SOFTMAX_ELEMENTWISE per logit + ATTENTION_ELEMENTWISE per attention score and
                weight), none for the exercise's linear MSE
    /step       two passes (the mixed step and its float32 twin) + REPORT_ELEMENTWISE per
                parameter entry (the report's host work) <= STEP_BUDGET; /downloads and the
                page's commit are a /step, and /downloads also needs at most MAX_GRADIENT_ROWS
                parameter entries (one CSV row each), checked before the step
    /dynamics   steps x (the model's multiply-adds x the recipe's factor + RUN_ELEMENTWISE
                per parameter entry + RUN_STEP_OVERHEAD) <= WORK_BUDGET (``run_step_work``,
                ``caps.steps_within_budget``; none when one step does not fit)
    /sweep      scales x (the model's multiply-adds x the recipe's factor + SWEEP_ELEMENTWISE
                per parameter entry: each scale's gradients, error norms and masks) <=
                SWEEP_BUDGET, and its memory (a batch of 8 scales' gradients at once) <=
                MEMORY_BUDGET (``check_sweep``, from ``core.runs.sweep``)
    /compare    every recipe's /step of the same settings (``compare_work``, the sum of their
                ``step_work``) <= COMPARE_BUDGET, each step within /step's own caps, and its
                memory one step's at a time (``check_compare``)
    /export and /inspect compute nothing: their work is their settings' own caps
    first call  a request's compile is a one-off per program and never refuses it; it may make
                the request large work, run one at a time (``core.settings.compile_cost``)
    memory      the bytes one request adds at its peak: a fixed part (programs, buffers), per
                parameter entry (float32 copies in both runs, gradients, the optimizer's state,
                the report's arrays) and per activation entry (N x the layout's activations:
                a chain's every width; a transformer's dense inputs, scores, weights, g and u)
                <= MEMORY_BUDGET; a refusal names the model's ``size_field`` and what fits

The constants are upper bounds fitted to bench/bench_load.py's rows on a 2-vCPU machine; the
parameter entries, not the batch, set an MLP's memory. The model over-counts both time and
memory, so the slowest accepted request stays within 8x the largest linear /step
(4096 x 1024 x 1024) and adds at most MEMORY_BUDGET.

Example::

    >>> from playground.core.model.models import ModelChoice
    >>> parameter_entries(ModelChoice("mlp", 2, 8), 3, 2)  # (3 + 1) x 8 + (8 + 1) x 8 + (8 + 1) x 2
    122
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Protocol

from playground.core.bounds import ConfigError
from playground.core.caps import STEP_BUDGET, SWEEP_BUDGET, WORK_FACTOR
from playground.core.formats.accumulation import Accumulation
from playground.core.model.losses import TASKS
from playground.core.model.models import MODELS, ModelChoice
from playground.core.model.optimizers import OPTIMIZERS
from playground.core.recipes.registry import RECIPES, recipe

# An emulated accumulation's matmuls (forward and backward) against XLA's own: the largest ratio
# bench/bench_accumulation.py prints, rounded up.
ACCUMULATION_WORK_FACTOR = 3.0
# Element-wise work per parameter entry and state array of one pass, in multiply-adds.
ELEMENTWISE = 8
# The step report's host work per parameter entry (its seven float32 rows, histograms, errors),
# in multiply-adds' time.
REPORT_ELEMENTWISE = 3072
# Per normalised activation entry of one pass: a layer norm's statistics, normalisation, scale,
# shift, gradients and checks; per logit: a softmax cross-entropy's and its gradient's.
NORM_ELEMENTWISE = 24
SOFTMAX_ELEMENTWISE = 16
# Per attention score and softmax weight a transformer keeps (its Layout's attention entries):
# the mask, the softmax and their gradients (the contractions are in its work).
ATTENTION_ELEMENTWISE = 8
# The labels of the fields a size refusal names (``ModelSpec.size_field``).
SIZE_LABELS = {
    "hidden_layers": "hidden layers",
    "hidden_width": "hidden width",
    "d_in": "input width D_in",
}
# The gradients download has one CSV row per parameter entry (about 107 bytes each).
MAX_GRADIENT_ROWS = 2**20 + 2**10
# /compare: every recipe's step in one request, up to two largest /step's work.
COMPARE_BUDGET = 2 * STEP_BUDGET
# Memory: one request may add at most this much to the server's peak (bytes); each part of the
# estimate is an upper bound of bench/bench_load.py's.
MEMORY_BUDGET = int(2**30 * WORK_FACTOR)
FIXED_BYTES = 192 * 2**20  # compiled programs, their buffers, the report's figures
PARAMETER_BYTES = 112  # float32 copies in both runs, gradients, report arrays
STATE_BYTES = 8  # each optimizer state array, in both runs
ACTIVATION_BYTES = 8  # per activation entry
# A sweep, per parameter entry and scale: the gradient, its error against the float32 twin's,
# the underflow and overflow masks, in multiply-adds' time.
SWEEP_ELEMENTWISE = 192
# A sweep's memory per parameter entry: a batch of 8 scales' gradients (lax.map) and the twin's;
# per activation entry, the 8 scales'.
SWEEP_ENTRY_BYTES = 240
SWEEP_BATCH = 8
# A training run, per parameter entry and step (three runs' updates, roundings and checks, in
# multiply-adds' time) and per step.
RUN_ELEMENTWISE = 480
RUN_STEP_OVERHEAD = 2**23


class Priced(Protocol):
    """What the cost model reads of a request's settings (a ``StepConfig``)."""

    n: int
    d_in: int
    d_out: int
    compute_dtype: str
    optimizer: str
    task: str
    accumulation: str

    @property
    def model_choice(self) -> ModelChoice: ...

    @property
    def model_work(self) -> int: ...


def parameter_entries(choice: ModelChoice, d_in: int, d_out: int) -> int:
    """Entries of every parameter: each dense layer's kernel (a x b) and bias (b), and each
    layer norm's scale and bias (its width each)."""
    layout = MODELS[choice.name].layout(choice, d_in, d_out)
    dense = sum(a * b + b for a, b in layout.dense)
    return dense + 2 * layout.normalised


def normalised_entries(choice: ModelChoice) -> int:
    """Entries per batch row that a layer norm normalises (an MLP's every hidden width, a
    transformer's two d_model-wide norms, or none); independent of D_in and D_out."""
    return MODELS[choice.name].layout(choice, 1, 1).normalised


def operation_work(config: Priced) -> int:
    """The layer norms', the softmax cross-entropy's and the attention's element-wise work in
    one pass (see the rule)."""
    logits = config.d_out if config.task != TASKS[0] else 0
    choice = config.model_choice
    layout = MODELS[choice.name].layout(choice, config.d_in, config.d_out)
    attention = sum(entries for kind, entries in layout.kept if kind == "attention")
    elementwise = layout.normalised * NORM_ELEMENTWISE + logits * SOFTMAX_ELEMENTWISE
    return config.n * (elementwise + attention * ATTENTION_ELEMENTWISE)


def matmul_factor(config: Priced) -> float:
    """The work per multiply-add of ``config``'s matmuls: its recipe's ``work_factor``, times
    ACCUMULATION_WORK_FACTOR when its accumulation is emulated."""
    emulated = Accumulation(config.accumulation).emulated
    return recipe(config.compute_dtype).work_factor * (ACCUMULATION_WORK_FACTOR if emulated else 1)


def pass_work(config: Priced) -> float:
    """Multiply-adds of one training pass of ``config`` (see the module rule)."""
    entries = parameter_entries(config.model_choice, config.d_in, config.d_out)
    elementwise = entries * ELEMENTWISE * (1 + OPTIMIZERS[config.optimizer].state_arrays)
    matmuls = config.model_work * matmul_factor(config)
    return matmuls + elementwise + operation_work(config)


def step_work(config: Priced) -> float:
    """Multiply-adds of one /step: the mixed step and its float32 twin, and the report's
    per-entry work."""
    entries = parameter_entries(config.model_choice, config.d_in, config.d_out)
    return 2 * pass_work(config) + entries * REPORT_ELEMENTWISE


def memory_bytes(config: Priced) -> int:
    """Bytes one /step of ``config`` adds to the server's peak (an upper bound)."""
    choice = config.model_choice
    entries = parameter_entries(choice, config.d_in, config.d_out)
    layout = MODELS[choice.name].layout(choice, config.d_in, config.d_out)
    per_entry = PARAMETER_BYTES + STATE_BYTES * OPTIMIZERS[config.optimizer].state_arrays
    activations = layout.activations + layout.normalised  # a norm keeps its own outputs
    return FIXED_BYTES + entries * per_entry + config.n * activations * ACTIVATION_BYTES


def run_step_work(config: Priced) -> int:
    """The work one training step of ``config`` counts against the run's cap (see the rule)."""
    entries = parameter_entries(config.model_choice, config.d_in, config.d_out)
    matmuls = config.model_work * matmul_factor(config)
    extra = operation_work(config)
    return math.ceil(matmuls + extra + entries * RUN_ELEMENTWISE + RUN_STEP_OVERHEAD)


def sweep_work(config: Priced, scales: int) -> float:
    """Multiply-adds of a sweep of ``config`` over ``scales`` loss scales (see the rule)."""
    entries = parameter_entries(config.model_choice, config.d_in, config.d_out)
    per_scale = config.model_work * matmul_factor(config)
    return scales * (per_scale + operation_work(config) + entries * SWEEP_ELEMENTWISE)


def sweep_memory_bytes(config: Priced) -> int:
    """Bytes a sweep of ``config`` adds to the server's peak (an upper bound)."""
    choice = config.model_choice
    entries = parameter_entries(choice, config.d_in, config.d_out)
    layout = MODELS[choice.name].layout(choice, config.d_in, config.d_out)
    activations = config.n * layout.activations * ACTIVATION_BYTES * SWEEP_BATCH
    return FIXED_BYTES + entries * SWEEP_ENTRY_BYTES + activations


def check_sweep(config: Priced, scales: int) -> None:
    """ConfigError when a sweep of ``config`` over ``scales`` scales is over the memory cap
    (naming the model's size) or the work cap (naming ``n`` and the largest N that fits)."""
    if sweep_memory_bytes(config) > MEMORY_BUDGET:
        _refuse_memory(config, sweep_memory_bytes, "a sweep of this model and batch")
    work = sweep_work(config, scales)
    if work <= SWEEP_BUDGET:
        return
    fits = max(0, math.floor(config.n * SWEEP_BUDGET / work))
    while fits and sweep_work(_priced(config, n=fits), scales) > SWEEP_BUDGET:
        fits -= 1
    per_row = config.model_work // config.n
    cap = f"2^{math.log2(SWEEP_BUDGET):.3g}"
    if fits == 0:
        field, label = _size_field(config)
        raise ConfigError(
            field,
            f"{field} ({label}): no N fits a {config.compute_dtype} sweep of this model: its "
            f"{scales} scales x its parameter entries' own work exceed {cap}, to keep one "
            "request to a few seconds. Fewer or narrower hidden layers, or smaller widths, fit.",
        )
    raise ConfigError(
        "n",
        f"n (batch rows N) must be at most {fits} for a {config.compute_dtype} sweep of this "
        f"model: its {scales} scales x the model's multiply-adds (N x {per_row:,}, and "
        f"{SWEEP_ELEMENTWISE} per parameter entry) may not exceed {cap}, to keep one request "
        f"to a few seconds; got {config.n}. A smaller N or smaller widths fit.",
    )


def check_step(config: Priced) -> None:
    """ConfigError when one step of ``config`` is over the work or memory cap.

    Memory is checked first: it does not depend on N, so its message names the model's size;
    the work's message names the largest N that fits.
    """
    if memory_bytes(config) > MEMORY_BUDGET:
        _refuse_memory(config)
    work = step_work(config)
    if work > STEP_BUDGET:
        fits = max(0, math.floor(config.n * STEP_BUDGET / work))
        while fits and step_work(_priced(config, n=fits)) > STEP_BUDGET:
            fits -= 1
        if fits == 0:
            field, label = _size_field(config)
            raise ConfigError(
                field,
                f"{field} ({label}): no N fits one step of this model, optimizer and compute "
                f"dtype: its parameter entries' own work exceeds 2^{math.log2(STEP_BUDGET):.3g}. "
                "Fewer or narrower hidden layers, or smaller widths, fit.",
            )
        raise ConfigError(
            "n",
            f"n (batch rows N) must be at most {fits} for this model, optimizer and compute "
            f"dtype: one step's work (the mixed step and its float32 twin, "
            f"{work:,.0f} multiply-adds) may not exceed 2^{math.log2(STEP_BUDGET):.3g}, to keep "
            f"one request to a few seconds; got {config.n}. A smaller N or smaller widths fit.",
        )


def compare_work(config: Priced) -> float:
    """Multiply-adds of one /compare: every registered recipe's /step of ``config``."""
    return sum(step_work(_priced(config, compute_dtype=name)) for name in RECIPES)


def check_compare(config: Priced) -> None:
    """ConfigError when /compare of ``config`` is over a cap: a recipe's step over /step's own
    (``check_step``'s message, naming the field and what fits), or the sum of every recipe's
    step over COMPARE_BUDGET (naming ``n`` and the largest N that fits). Its steps run one
    after another, so its memory is one step's."""
    for name in RECIPES:
        check_step(_priced(config, compute_dtype=name))
    work = compare_work(config)
    if work <= COMPARE_BUDGET:
        return
    fits = max(0, math.floor(config.n * COMPARE_BUDGET / work))
    while fits and compare_work(_priced(config, n=fits)) > COMPARE_BUDGET:
        fits -= 1
    cap = f"2^{math.log2(COMPARE_BUDGET):.3g}"
    if fits == 0:
        field, label = _size_field(config)
        raise ConfigError(
            field,
            f"{field} ({label}): no N fits a comparison of every recipe on this model: its "
            f"{len(RECIPES)} steps' parameter work alone exceeds {cap}. Fewer or narrower "
            "hidden layers, or smaller widths, fit.",
        )
    raise ConfigError(
        "n",
        f"n (batch rows N) must be at most {fits} to compare every recipe on this model: its "
        f"{len(RECIPES)} steps (each the mixed step and its float32 twin, {work:,.0f} "
        f"multiply-adds together) may not exceed {cap}, to keep one request to a few seconds; "
        f"got {config.n}. A smaller N or smaller widths fit.",
    )


def check_downloads(config: Priced) -> None:
    """ConfigError before any compute when the /downloads request cannot be served: its step
    is over a cap (``check_step``), or its gradients CSV would have more than
    MAX_GRADIENT_ROWS rows (one per parameter entry)."""
    check_step(config)
    check_gradient_rows(parameter_entries(config.model_choice, config.d_in, config.d_out))


def check_gradient_rows(rows: int) -> None:
    """ConfigError on ``n`` when a gradients CSV of ``rows`` parameter entries (one row each)
    would be past MAX_GRADIENT_ROWS."""
    if rows > MAX_GRADIENT_ROWS:
        raise ConfigError(
            "n",
            f"The gradients download has one row per parameter entry: this model has "
            f"{rows:,} entries (a file of about {rows * 107 / 1e6:,.0f} MB), more than the "
            f"{MAX_GRADIENT_ROWS:,} allowed. A smaller model fits (smaller D_in x D_out, or "
            "fewer or narrower hidden layers).",
        )


def _priced(config: Priced, **changes: int | str) -> Priced:
    """``config`` with some fields replaced, for pricing only: no validation (which would
    price it again)."""
    clone = object.__new__(type(config))
    clone.__dict__.update(config.__dict__ | changes)
    return clone


def _size_field(config: Priced) -> tuple[str, str]:
    """The field that sets the model's size (its registry entry's ``size_field``: the MLP's
    hidden layers, the transformer's hidden width, D_in for the linear one) and its label."""
    field = MODELS[config.model_choice.name].size_field
    return field, SIZE_LABELS[field]


def _refuse_memory(
    config: Priced, need: Callable[[Priced], int] = memory_bytes, what: str = "one step"
) -> None:
    """ConfigError naming the model's size field and what fits under MEMORY_BUDGET."""
    field, label = _size_field(config)
    if field == "hidden_layers":
        fits = config.model_choice.hidden_layers - 1
        while fits and need(_priced(config, hidden_layers=fits)) > MEMORY_BUDGET:
            fits -= 1
        advice = (
            f"at most {fits} hidden layers fit at this width and N"
            if fits
            else "a narrower hidden width or a smaller N fits"
        )
    elif field == "hidden_width":
        fits = _widest_fitting(config, need)
        advice = (
            f"a hidden width of at most {fits} fits at this N"
            if fits
            else "a smaller N or smaller widths fit"
        )
    else:
        advice = "smaller widths or a smaller N fit"
    raise ConfigError(
        field,
        f"{field} ({label}): {what} would add about {need(config) / 2**20:,.0f} MB to the "
        f"server's memory, more than the {MEMORY_BUDGET / 2**20:,.0f} MB one request may use "
        f"(this model, optimizer and batch); {advice}.",
    )


def _widest_fitting(config: Priced, need: Callable[[Priced], int]) -> int:
    """The largest hidden width below the config's, a multiple of its ``heads`` (each head a
    whole number of features), whose ``need`` is within MEMORY_BUDGET; 0 when none is. The
    need grows with the width, so a bisection over the multiples finds it."""
    step = max(1, getattr(config.model_choice, "heads", 1))
    low, high = 0, config.model_choice.hidden_width // step - 1  # in multiples of ``step``
    while low < high:
        middle = (low + high + 1) // 2
        if need(_priced(config, hidden_width=middle * step)) <= MEMORY_BUDGET:
            low = middle
        else:
            high = middle - 1
    return low * step
