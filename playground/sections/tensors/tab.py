"""The "Your tensors" section: a user's safetensors file, every tensor against every format.

Rule: ``tensors_views(report)`` gives the endpoint's and the page's outputs for a whole file
(the JSON, the per-tensor table, the file's sentences, the chosen tensor's sentences and
figure, the tensor names to choose from), ``tensor_views(report, name, fmt)`` those of one
tensor, each as plain values (JSON-able dicts, Markdown, Plotly dicts). The page
(``ui.tabs.tensors``) lays out the components under the same names. The first tensor chosen is
the one that loses the largest share of its entries to zero in a plain-cast recipe's dtype.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from playground.core.caps import (
    TENSOR_FILE_MAX_BYTES,
    TENSOR_SAMPLE_VALUES,
    TENSORS_MAX_COUNT,
    TENSORS_MAX_ELEMENTS,
)
from playground.core.tensors.formats import VALUE_FORMATS
from playground.core.tensors.recipe_stats import RECIPES
from playground.core.tensors.report import TensorReport, TensorsReport
from playground.sections.tensors.charts import LOSS_SCALED_FORMATS, shaded_format, tensor_figure
from playground.sections.tensors.summary import (
    COMMAND,
    TABLE_HEADERS,
    file_sentences,
    table,
    tensor_sentences,
    tensors_summary,
)
from playground.views.numbers import bullets

TAB_LABEL = "Your tensors"


def column_widths(headers: list[str], first: int = 20) -> list[str]:
    """Each column's share of the table's width: its heading's longest word (a space or a
    hyphen breaks a heading, nothing else) and a margin of four (the cell's padding), the first
    column (the names) ``first`` characters; a recipe's name then never breaks inside itself."""
    weights = [first] + [max(map(len, h.replace("-", " ").split())) + 4 for h in headers[1:]]
    return [f"{100 * weight / sum(weights):.2f}%" for weight in weights]


# The tensors table's column widths (ui.tabs.tensors): it fits the results column at 1400 px.
TABLE_WIDTHS = column_widths(TABLE_HEADERS)

FIGURE_LABEL = "Magnitudes of the chosen tensor against every format's ranges"
# The two ways to write such a file, shown on the page and in docs/using.md (a test runs both).
SAVE_TORCH = """\
from safetensors.torch import save_file
loss.backward()  # then, before optimizer.zero_grad():
save_file({n: p.grad.contiguous() for n, p in model.named_parameters() if p.grad is not None},
          "grads.safetensors")"""
SAVE_JAX = """\
from safetensors.numpy import save_file
grads = jax.grad(loss_fn)(params)  # any pytree of arrays: gradients, weights, activations
save_file({jax.tree_util.keystr(k, simple=True, separator="."): np.asarray(g)
           for k, g in jax.tree_util.tree_leaves_with_path(grads)}, "grads.safetensors")"""
INTRO = f"""
### Your model's own tensors
Upload a `.safetensors` file (Hugging Face's format for tensors: checkpoints, or gradients you
save yourself) and see what each training recipe ({", ".join(RECIPES)}) stores of each
tensor, as TransformerEngine's debug statistics count it: the share of its entries stored as 0
(underflow) or saturated, the error in norm, the MSE and the range of its scales, with NaN and
inf entries counted and named. The FP8 and FP4 recipes scale before they cast, as training
does (one scale per tensor, per 32-value block, per 128 x 128 or 16 x 16 tile); a conv weight
is read as the out x (in x kernel) matrix its matmul multiplies. A plain cast to every value
format ({", ".join(VALUE_FORMATS)}) is shown too, with the loss scales that keep a tensor in
range.

At most {TENSOR_FILE_MAX_BYTES / 2**20:g} MB and {TENSORS_MAX_COUNT} tensors (what a public
Space can keep on disk and read a tensor at a time); the file is read once and deleted. A
tensor over {TENSOR_SAMPLE_VALUES:,} values (or a file over {TENSORS_MAX_ELEMENTS:,} together)
is analysed on a sample of whole rows, and the page says so; its NaN and inf are still counted
over every value. For a whole checkpoint (a folder of shards, a Hugging Face model folder or
hub id), every value, on your machine:

```bash
{COMMAND}
```

From PyTorch (gradients after `backward()`):

```python
{SAVE_TORCH}
```

From JAX or numpy:

```python
{SAVE_JAX}
```
"""


class TensorsViews(NamedTuple):
    """The outputs for a whole file, by the names the page's components carry."""

    tensors_json: dict[str, Any]
    tensors_table: dict[str, Any]
    tensors_reading: str
    tensor_reading: str
    tensor_plot: dict[str, Any]
    tensor_names: list[str]
    tensor_name: str
    tensor_format: str


def first_tensor(report: TensorsReport) -> TensorReport:
    """The tensor that loses the largest share to zero in a plain-cast recipe's dtype (the
    question a loss scale answers), then in any format; the file's first on a tie."""

    def lost(tensor: TensorReport) -> tuple[float, float]:
        def worst(formats: tuple[str, ...]) -> float:
            shares = [tensor.formats[f].zero or 0.0 for f in formats if f in tensor.formats]
            return max(shares, default=-1.0)

        return worst(LOSS_SCALED_FORMATS), worst(VALUE_FORMATS)

    ordered = sorted(
        enumerate(report.tensors), key=lambda item: (*(-v for v in lost(item[1])), item[0])
    )
    return ordered[0][1]


def tensor_views(report: TensorsReport, name: str, fmt: str | None = None) -> tuple[str, Any]:
    """(the tensor's sentences as Markdown, its figure) for tensor ``name``; ``fmt`` the
    shaded format (None: ``shaded_format``'s choice); KeyError for a name not in the file."""
    tensor = report.tensor(name)
    return bullets(tensor_sentences(tensor)), tensor_figure(tensor, fmt)


def tensors_views(report: TensorsReport) -> TensorsViews:
    """Every output for ``report`` (see the module rule)."""
    chosen = first_tensor(report)
    headers, rows = table(report)
    reading, figure = tensor_views(report, chosen.name)
    return TensorsViews(
        tensors_json=tensors_summary(report),
        tensors_table={"headers": headers, "data": rows},
        tensors_reading=bullets(file_sentences(report)),
        tensor_reading=reading,
        tensor_plot=figure,
        tensor_names=[tensor.name for tensor in report.tensors],
        tensor_name=chosen.name,
        tensor_format=shaded_format(chosen),
    )
