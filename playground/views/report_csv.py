"""The CSV file of each report: its columns, its rows and its name.

Rule: one row per entry of the report's arrays, in the report's order; every float32 written
exactly (see ``csv_files``); the file named ``{what}_{settings}.csv`` (see ``file_names``).

    gradients_csv  a StepReport: one row per parameter entry, at most MAX_GRADIENT_ROWS rows
                   (about 107 bytes each; more are refused with a ValueError that names the
                   size). The bound admits the largest model of the default caps (1024 x 1024
                   kernel + 1024 bias, about 112 MB) and no more
    sweep_csv      a SweepReport: one row per log2 loss scale
    dynamics_csv   a DynamicsReport: one row per state after k = 0 .. K updates
"""

from __future__ import annotations

import numpy as np

from playground.core.runs.sweep import SweepReport
from playground.core.runs.train import DynamicsReport
from playground.core.settings.cost import check_gradient_rows
from playground.core.step.report import StepReport
from playground.views.csv_files import (
    constant_column,
    flag_column,
    float_column,
    index_column,
    int_column,
    write_csv,
)
from playground.views.file_names import settings_tag

GRADIENT_COLUMNS = {
    "before": "before",
    "scaled_gradient": "scaled_grads",
    "unscaled_gradient": "mixed_grads",
    "float32_gradient": "float32_grads",
    "update": "updates",
    "mixed_after": "mixed_after",
    "float32_after": "float32_after",
}
SWEEP_COLUMNS = (
    "log2_scale",
    "scale",
    "rel_error",
    "underflow_share",
    "nonfinite_share",
    "new_loss",
    "safe",
)
DYNAMICS_LOSSES = ("float32_loss", "mixed_loss", "pure_loss")
DYNAMICS_PER_STEP = (
    "mixed_scale",
    "mixed_skipped",
    "mixed_lost_share",
    "pure_scale",
    "pure_skipped",
    "pure_lost_share",
    "mixed_saturated_share",
    "pure_saturated_share",
)


def gradients_csv(report: StepReport) -> str:
    """Every parameter entry of a step report, one row each; returns the file's path.

    Columns: ``parameter`` (path name), ``index`` (see below), ``before``, ``scaled_gradient``
    (the compute dtype's gradient of S x loss), ``unscaled_gradient`` (that divided by S in
    float32: what the mixed step's optimizer got), ``float32_gradient`` (the float32 twin's),
    ``update`` (what the mixed step's optimizer added), ``mixed_after``, ``float32_after``: the
    ParamReport arrays, exact float32 values.

    Rows come parameter by parameter in the report's order, each in C order. ``index`` is the
    entry's position in its parameter's array, the indices joined by commas: ``"3,1"`` is
    ``kernel[3, 1]`` (input feature 3, output 1), quoted as CSV requires; ``2`` is ``bias[2]``;
    the field is empty for a 0-d parameter.

    Raises:
      ConfigError (a ValueError) naming the size when the report has more entries than
      core.settings.cost's MAX_GRADIENT_ROWS.
    """
    check_gradient_rows(sum(param.size for param in report.params.values()))
    blocks = []
    for name, param in report.params.items():
        columns = [constant_column(name), index_column(param.before.shape)]
        columns += [float_column(getattr(param, field)) for field in GRADIENT_COLUMNS.values()]
        blocks.append((param.size, columns))
    filename = f"gradients_{settings_tag(report.config.to_dict())}.csv"
    return write_csv(filename, ["parameter", "index", *GRADIENT_COLUMNS], blocks)


def sweep_csv(sweep: SweepReport) -> str:
    """The loss-scale sweep, one row per log2 scale; returns the file's path.

    Columns: ``log2_scale`` (integer k), ``scale`` (2^k as the float32 the sweep used),
    ``rel_error``, ``underflow_share``, ``nonfinite_share``, ``new_loss`` (the SweepReport
    curves at that scale) and ``safe`` (1 inside the safe window, else 0).
    """
    exponents = np.asarray(sweep.exponents)
    columns = [
        int_column(exponents),
        float_column(np.exp2(exponents).astype(np.float32)),
        *(float_column(getattr(sweep, name)) for name in SWEEP_COLUMNS[2:-1]),
        flag_column(sweep.safe),
    ]
    filename = f"sweep_{settings_tag(sweep.config.to_dict(), scale=False)}.csv"
    return write_csv(filename, SWEEP_COLUMNS, [(exponents.size, columns)])


def dynamics_csv(dynamics: DynamicsReport) -> str:
    """The three training runs, one row per step 0 .. K; returns the file's path.

    Row k holds the state after k updates: ``step`` = k and the three runs' losses
    (``float32_loss``, ``mixed_loss``, ``pure_loss``, entry k of the report's curves). Rows
    k >= 1 also hold the update that produced that state, the report's entry k - 1 of the
    per-step arrays: ``mixed_scale``, ``mixed_skipped``, ``mixed_lost_share``, ``pure_scale``,
    ``pure_skipped``, ``pure_lost_share``, ``mixed_saturated_share``, ``pure_saturated_share``
    (skipped as 1/0; the saturated shares are 0 but under float8). Those fields are empty in
    row 0, which no update produced.
    """
    steps = dynamics.steps
    present = np.arange(steps + 1) > 0
    columns = [int_column(np.arange(steps + 1))]
    columns += [float_column(getattr(dynamics, name)) for name in DYNAMICS_LOSSES]
    for name in DYNAMICS_PER_STEP:
        values = np.asarray(getattr(dynamics, name))
        shifted = np.concatenate([values[:1], values])  # row k <- entry k - 1; row 0 is empty
        make = flag_column if name.endswith("_skipped") else float_column
        columns.append(make(shifted, present))
    filename = f"dynamics_{settings_tag(dynamics.config.to_dict(), run=True)}.csv"
    return write_csv(
        filename, ["step", *DYNAMICS_LOSSES, *DYNAMICS_PER_STEP], [(steps + 1, columns)]
    )
