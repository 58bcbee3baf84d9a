"""The "Compare recipes" section: every registered recipe on the page's step, side by side.

Rule: ``compare_views(comparison, memory)`` gives the endpoint's and the page's outputs, as plain
values (the JSON, its sentences, the recipes' table, the memory ledger's table, the small
multiples); a real transformer's ledgers (``memory``) join the JSON as ``architecture``
(``sections.compare.memory``). The page (``ui.tabs.compare``) lays out components under the
same names.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from playground.core.compare.architecture_ledger import ArchitectureMemory
from playground.core.compare.comparison import Comparison
from playground.core.recipes.registry import RECIPES
from playground.sections.compare.charts import FIGURE_TITLE, comparison_figure
from playground.sections.compare.memory import architecture_json
from playground.sections.compare.summary import memory_table, reading, rows_table, summarize
from playground.views.numbers import bullets

LABEL = "Compare recipes"
FIGURE_LABEL = FIGURE_TITLE
INTRO = f"""
### Every recipe on this step
The step the controls describe (model, batch, starting parameters), run once under each
recipe ({", ".join(RECIPES)}) beside the same float32 twin, in one request: each row's new loss
is the one the step shows for that recipe. The errors are against float32; *flushed* counts
the parameters' gradient entries that are exactly zero where float32's are not, *non-finite*
those that are inf or NaN, *saturated* the gradients arriving at the matmuls that were clipped
to their format's largest value. The memory ledger counts what a trainer
keeps per parameter as the ZeRO paper does (Rajbhandari et al., 2020: low-precision working
weights and gradients, float32 masters, the optimizer's state), plus each recipe's quantized
copies and scales, and the activations its backward pass keeps; give your own model's size to
scale it.
"""


class CompareViews(NamedTuple):
    """The section's outputs, in the endpoint's order."""

    compare_json: dict[str, Any]
    compare_reading: str
    compare_table: str
    compare_memory: str
    compare_plot: dict[str, Any]


def compare_views(comparison: Comparison, memory: ArchitectureMemory | None = None) -> CompareViews:
    """Every output of the section for ``comparison`` (and a transformer's ``memory``)."""
    sentences = reading(comparison)
    summary = summarize(comparison, sentences)
    if memory is not None:
        summary["architecture"] = architecture_json(memory)
    return CompareViews(
        compare_json=summary,
        compare_reading=bullets(sentences),
        compare_table=rows_table(comparison),
        compare_memory=memory_table(comparison),
        compare_plot=comparison_figure(comparison),
    )
