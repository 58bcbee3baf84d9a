"""Every registered recipe on the same step: one row per recipe against the float32 twin.

Rule: the comparison runs ``run_report`` (``core.step.report``, the very step /step runs) once per
entry of ``RECIPES``, in the registry's order, on the same settings but ``compute_dtype``: the
same model seed, batch (or upload) and starting parameters, so each row's ``mixed_new`` is
/step's for that recipe, bit for bit, and its ``float32_new`` the same twin's. Each report is
read down to its row before the next step runs, so at most one report is alive at once::

    loss_error        mixed_new - float32_new; loss_rel_error = |loss_error| / |float32_new|
    grad_rel_error    ||mixed grads - float32 grads|| / ||float32 grads|| over every parameter
                      entry at once, in float64 (``metrics.norm_ratio``)
    flushed           parameter gradient entries 0 in the mixed step but not in float32
    nonfinite         parameter gradient entries inf or NaN in the mixed step
    saturated         of the gradients arriving at the matmuls' outputs (a quantizing recipe
                      quantizes them), the entries clipped to the gradient format's largest
                      value; a recipe whose casts do not saturate has none (an overflow is inf)
    first_nonfinite   the operation where inf or NaN first appeared, forward and backward
    error_counts      the entries' relative errors |mixed - float32| / |float32| by binade,
                      floor(log2), clipped to [ERROR_LOW, ERROR_HIGH], with three more bins:
                      exact (no error), non-finite (the mixed entry is inf or NaN) and
                      undefined (float32's entry is 0 and the mixed one finite)

The closest recipe is the one with the smallest finite ``grad_rel_error`` (the smallest
``|loss_error|`` between equals; registry order after that).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from playground.core.compare.memory import MemoryLedger, memory_ledger
from playground.core.data.user_data import UserData
from playground.core.formats import metrics
from playground.core.formats.dtypes import dtype_facts
from playground.core.frozen import freeze
from playground.core.recipes.registry import FLOAT32, RECIPES
from playground.core.settings.cost import check_compare
from playground.core.settings.settings import StepConfig
from playground.core.step.report import StepReport, run_report

# The binades of the relative-error histogram: from float32's unit roundoff (2^-24; an error
# below it is float32's own rounding) to 2^4 (16 times the entry itself, or more).
ERROR_LOW = int(math.log2(dtype_facts(FLOAT32).eps)) - 1
ERROR_HIGH = 4
EXTRA_BINS = ("exact", "non-finite", "undefined")
# The role of the gradient arriving at a matmul's output among a quantizing step's tensors.
GRADIENT_ROLE = "gradient"


@dataclass(frozen=True)
class RecipeRow:
    """One recipe's step against the float32 twin (see the module rule)."""

    recipe: str
    mixed_initial: float
    mixed_new: float
    float32_initial: float
    float32_new: float
    grad_rel_error: float
    entries: int
    flushed: int
    nonfinite: int
    saturated: int
    quantized_gradient_entries: int
    first_nonfinite: dict[str, str | None]
    error_counts: np.ndarray  # ERROR_LOW..ERROR_HIGH, then EXTRA_BINS

    @property
    def loss_error(self) -> float:
        return self.mixed_new - self.float32_new

    @property
    def loss_rel_error(self) -> float:
        return float(metrics.norm_ratio(abs(self.loss_error), abs(self.float32_new)))

    @property
    def flushed_share(self) -> float:
        return self.flushed / self.entries

    @property
    def nonfinite_share(self) -> float:
        return self.nonfinite / self.entries

    @property
    def saturated_share(self) -> float:
        quantized = self.quantized_gradient_entries
        return self.saturated / quantized if quantized else 0.0


def error_counts(mixed: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The histogram of the module rule for flat gradients ``mixed`` against ``base``."""
    with np.errstate(all="ignore"):
        relative = np.abs(mixed.astype(np.float64) - base) / np.abs(base.astype(np.float64))
    finite = np.isfinite(mixed)
    undefined = finite & (base == 0)
    exact = finite & ~undefined & (relative == 0)
    binned = finite & ~undefined & ~exact
    exponents = np.clip(np.floor(np.log2(relative[binned])), ERROR_LOW, ERROR_HIGH)
    counts = np.bincount(
        (exponents - ERROR_LOW).astype(np.int64), minlength=ERROR_HIGH - ERROR_LOW + 1
    )
    extra = [np.count_nonzero(exact), np.count_nonzero(~finite), np.count_nonzero(undefined)]
    return np.concatenate([counts, extra]).astype(np.int64)


def recipe_row(report: StepReport) -> RecipeRow:
    """The row of one recipe's step report."""
    params = report.params.values()
    mixed = np.concatenate([p.mixed_grads.ravel() for p in params])
    base = np.concatenate([p.float32_grads.ravel() for p in params])
    with np.errstate(all="ignore"):
        difference = np.linalg.norm(mixed.astype(np.float64) - base)
        grad_rel_error = float(
            metrics.norm_ratio(difference, np.linalg.norm(base.astype(np.float64)))
        )
    gradients = [t for t in report.float8 if t.role == GRADIENT_ROLE]
    return RecipeRow(
        recipe=report.config.compute_dtype,
        mixed_initial=report.mixed_initial_loss,
        mixed_new=report.mixed_new_loss,
        float32_initial=report.float32_initial_loss,
        float32_new=report.float32_new_loss,
        grad_rel_error=grad_rel_error,
        entries=int(base.size),
        flushed=sum(p.underflow_count for p in params),
        nonfinite=sum(p.nonfinite_count for p in params),
        saturated=sum(t.saturated for t in gradients),
        quantized_gradient_entries=sum(t.size for t in gradients),
        first_nonfinite=dict(report.first_nonfinite),
        error_counts=freeze(error_counts(mixed, base)),
    )


@dataclass(frozen=True)
class Comparison:
    """Every recipe's row and memory ledger, in the registry's order, for ``config``."""

    config: StepConfig
    rows: tuple[RecipeRow, ...]
    memory: tuple[MemoryLedger, ...]

    @property
    def closest(self) -> RecipeRow | None:
        """The row closest to float32 (see the module rule); None when no row's error is
        finite."""
        finite = [row for row in self.rows if math.isfinite(row.grad_rel_error)]
        if not finite:
            return None
        return min(finite, key=lambda row: (row.grad_rel_error, _magnitude(row.loss_error)))


def _magnitude(value: float) -> float:
    return abs(value) if math.isfinite(value) else math.inf


def run_comparison(
    config: StepConfig,
    data: UserData | None = None,
    param_count: int = 0,
    tokens_per_batch: int = 0,
) -> Comparison:
    """Every recipe's step on ``config`` (and ``data``), with the memory ledgers scaled to
    ``param_count`` and ``tokens_per_batch`` (0: this model's); ConfigError, before any step,
    naming the field over a cap (``core.settings.cost.check_compare``) or a bad size."""
    check_compare(config)
    memory = tuple(
        memory_ledger(config, recipe, param_count, tokens_per_batch) for recipe in RECIPES.values()
    )
    rows = tuple(
        recipe_row(run_report(config.replace(compute_dtype=name), data)) for name in RECIPES
    )
    return Comparison(config=config, rows=rows, memory=memory)
