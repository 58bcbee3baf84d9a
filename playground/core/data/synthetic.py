"""Synthetic regression data: a random linear teacher plus a little noise (per token for a
sequence model).

Rule, with z ~ N(0, 1) of shape (N, D_in), teacher T ~ N(0, 1/D_in) of shape (D_in, D_out) and
noise e ~ N(0, NOISE_STD**2) of shape (N, D_out), all drawn from ``data_seed``::

    x = input_scale  * z
    y = target_scale * (z @ T + e)

So every entry of x is of order ``input_scale`` and every entry of y of order ``target_scale``,
whatever the shapes. For ``task = classification`` the same draws give each row a class, the
teacher's largest output, and y is its one-hot row (``target_scale`` plays no part)::

    label = argmax(z @ T + e, axis=-1)        y = one_hot(label, D_out)

so the best logits are a multiple of z @ T, and the logits of a model grow with ``input_scale``.
For a sequence model (a registry entry with ``sequence``: the transformer) the rows are tokens of
sequences of ``seq_len`` (rows 0..T-1 the first, the last one shorter when T does not divide N),
and the same draws give each token the teacher applied to the causal running mean of z over its
sequence so far::

    c_t = mean(z_s for s in t's sequence, s <= t)        y_t = target_scale * (c_t @ T + e_t)

(classification: the argmax of c_t @ T + e_t, one-hot); x is unchanged. The mean is taken in
float64 and rounded to float32 once.
With ``outlier_share`` > 0, a few entries of x (drawn from the data seed) are then multiplied by
``outlier_scale`` (``core.recipes.block_outliers.add_outliers``); y is unchanged.
The two knobs move the data toward the low-precision dtype's underflow
(tiny scales) or overflow (huge scales) without changing the problem's structure: the best
kernel is ``T * target_scale / input_scale``.
"""

from __future__ import annotations

import functools

import numpy as np

from playground.core.bounds import ConfigError
from playground.core.model.models import MODELS
from playground.core.recipes.block_outliers import add_outliers
from playground.core.settings.settings import StepConfig

NOISE_STD = 0.1


def make_batch(config: StepConfig) -> tuple[np.ndarray, np.ndarray]:
    """Draw the batch for ``config`` with numpy's PCG64 generator seeded by ``data_seed``.

    z, T and e are drawn in that order as float32; numpy rather than jax.random, because a new
    shape then costs no compilation (jax.random's sampler compiles once per shape).
    The two most recent batches are kept, so changing lr or loss_scale reuses the batch.

    Args:
      config: a validated StepConfig; uses data_seed, n, d_in, d_out, input_scale, target_scale,
        task, outlier_share and outlier_scale, and seq_len for a sequence model.

    Returns:
      (x, y): read-only float32 numpy arrays of shapes (n, d_in) and (n, d_out).
    """
    return _draw(
        config.data_seed,
        config.n,
        config.d_in,
        config.d_out,
        config.input_scale,
        config.target_scale,
        config.task,
        config.outlier_share,
        config.outlier_scale,
        config.seq_len if MODELS[config.model].sequence else 0,
    )


def running_means(z: np.ndarray, seq_len: int) -> np.ndarray:
    """c (float32, z's shape): each row the mean of z's rows of its sequence up to itself
    (sequences of ``seq_len`` consecutive rows, the last one shorter), in float64."""
    n, d = z.shape
    padded = -(-n // seq_len) * seq_len
    rows = np.zeros((padded, d), np.float64)
    rows[:n] = z
    sums = np.cumsum(rows.reshape(-1, seq_len, d), axis=1)
    counts = np.arange(1, seq_len + 1, dtype=np.float64)[None, :, None]
    return (sums / counts).reshape(padded, d)[:n].astype(np.float32)


def class_targets(
    column: np.ndarray, classes: int, first_row: int = 1, column_number: int | None = None
) -> np.ndarray:
    """An uploaded CSV's last column read as integer classes: its one-hot rows (N, classes).

    Each cell must be a whole number in [0, classes); anything else is a ConfigError on
    ``data`` naming the first offending row as a spreadsheet counts it (``first_row`` is the
    row of the column's first cell: 1 without a header, 2 below one) and, when given, the
    column (``column_number``, from 1).
    """
    values = np.asarray(column, np.float64).ravel()
    bad = ~np.isfinite(values) | (values != np.round(values)) | (values < 0) | (values >= classes)
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        cell = f"row {row + first_row}" + (f", column {column_number}" if column_number else "")
        raise ConfigError(
            "data",
            f"data (your CSV file): for classification the last column holds the class, a whole "
            f"number in [0, {classes - 1}] (D_out = {classes} classes); {cell} has "
            f"{values[row]:g}",
        )
    return one_hot(values.astype(np.int64), classes)


def one_hot(labels: np.ndarray, classes: int) -> np.ndarray:
    """(N, classes) float32 rows with a 1 at each row's label (integers in [0, classes))."""
    return (np.asarray(labels)[:, None] == np.arange(classes)).astype(np.float32)


@functools.lru_cache(maxsize=2)
def _draw(
    data_seed,
    n,
    d_in,
    d_out,
    input_scale,
    target_scale,
    task="regression",
    outlier_share=0.0,
    outlier_scale=1.0,
    seq_len=0,
):
    rng = np.random.default_rng(data_seed)
    z = rng.standard_normal((n, d_in), dtype=np.float32)
    teacher = rng.standard_normal((d_in, d_out), dtype=np.float32)
    teacher /= np.float32(np.sqrt(d_in))
    noise = rng.standard_normal((n, d_out), dtype=np.float32)
    noise *= np.float32(NOISE_STD)
    x = np.float32(input_scale) * z
    seen = running_means(z, seq_len) if seq_len else z  # what each row's target depends on
    if task == "classification":
        y = one_hot(np.argmax(seen @ teacher + noise, axis=-1), d_out)
    else:
        y = np.float32(target_scale) * (seen @ teacher + noise)
    if outlier_share > 0:
        x = add_outliers(x, outlier_share, outlier_scale, data_seed)
    x.flags.writeable = False
    y.flags.writeable = False
    return x, y
