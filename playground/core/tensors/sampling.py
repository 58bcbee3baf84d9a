"""A tensor as its matmul sees it, and an even sample of its rows.

Rule::

    matmul_shape   rank 0 -> (1, 1); rank 1 -> (1, n), one row; rank 2 -> itself;
                   rank > 2 (a conv weight (out, in, k...)) -> (out, in x prod(k)), the
                   out x (in * kernel) matrix a framework's im2col matmul multiplies
    sample_rows    at most ``sample`` values of a (rows, columns) matrix: whole groups of
                   SAMPLE_GROUP_ROWS consecutive rows at an even stride, so that every block
                   recipe's tiles (128 x 128 at most) hold real neighbours; a group wider than
                   the budget shrinks to the rows that fit (at least one row)

In C order every row range of the matmul view is one contiguous range of the stored bytes, so a
sample is read without reading the rest of the tensor.

Example::

    >>> matmul_shape((8, 3, 5, 5))
    (8, 75)
    >>> sample_rows(1024, 64, 2 * 128 * 64)
    [slice(0, 128, None), slice(512, 640, None)]
"""

from __future__ import annotations

import math

import numpy as np

SAMPLE_GROUP_ROWS = 128


def matmul_shape(shape: tuple[int, ...]) -> tuple[int, int]:
    """(rows, columns) of a tensor of ``shape`` as a framework feeds it to its matmul."""
    if len(shape) == 0:
        return (1, 1)
    if len(shape) == 1:
        return (1, shape[0])
    return (shape[0], math.prod(shape[1:]))


def matmul_view(values: np.ndarray) -> np.ndarray:
    """``values`` reshaped to ``matmul_shape`` (a view, no copy)."""
    return values.reshape(matmul_shape(values.shape))


def sample_rows(rows: int, columns: int, sample: int) -> list[slice]:
    """The row ranges of a sample of at most ``sample`` values (see the module rule); for a
    single row wider than the budget, the caller keeps its first ``sample`` values."""
    group = min(SAMPLE_GROUP_ROWS, rows, max(1, sample // max(columns, 1)))
    groups = -(-rows // group)
    keep = max(1, min(groups, sample // max(group * columns, 1)))
    stride = groups / keep
    starts = sorted({int(i * stride) * group for i in range(keep)})
    return [slice(start, min(start + group, rows)) for start in starts]
