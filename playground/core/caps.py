"""The limits of one request: the numeric ceilings of the settings and the work budgets.

Rule: a limit is written here once and the settings table (``core.settings.fields``) reads
it. Work is counted in a model's multiply-adds of one forward pass over the batch
(``StepConfig.model_work``, from the model's registry entry); a request is refused before any
JAX code runs when its work times its repetitions (sweep scales, training steps) exceeds a
budget. The shape caps and both budgets come from environment variables, so bigger hardware
can raise them without a code change.

Example::

    >>> steps_within_budget(1024 * 256 * 128)  # 2^35 / 2^25 = 1024, then MAX_STEPS
    1000
    >>> steps_within_budget(4096 * 1024 * 1024)
    8
    >>> steps_within_budget(2**36)  # one step is over the budget: none fits
    0
"""

from __future__ import annotations

import os

import numpy as np

# JAX's threefry key holds 32 bits while x64 is off: jax.random.key(2**32) silently equals
# jax.random.key(0), so larger seeds are refused instead of wrapping.
SEED_MAX = 2**32 - 1
# The largest float32 is the ceiling for anything that is multiplied into float32 values.
FLOAT32_MAX = float(np.finfo(np.float32).max)
# The loss scale S and its reciprocal 1/S must both be normal float32 numbers: XLA on CPU may
# rewrite g / S as g * (1/S) and flushes a subnormal 1/S (S > 2^126) to zero, and it flushes a
# subnormal S (below 2^-126) to zero, making 0/0. Within [2^-126, 2^126] every code path (the
# exercise's step, the report, the sweep, the dynamics) computes the same update.
LOSS_SCALE_MIN = float(np.finfo(np.float32).smallest_normal)
LOSS_SCALE_MAX = 1.0 / LOSS_SCALE_MIN
MAX_STEPS = 1000


def _env_number(name: str, default: float) -> float:
    """A cap from the environment (to raise it on bigger hardware), or its default."""
    return float(os.environ.get(name, default))


# Work caps of one request, sized so that no single request holds a small shared CPU (a public
# Space's 2 vCPUs) for more than a few seconds:
#   shapes      N <= MAX_N, D_in and D_out <= MAX_WIDTH
#   sweep       scales x N x D_in x D_out <= SWEEP_BUDGET (16 scales at the largest shape;
#               bfloat16's 127 scales up to N x D_in x D_out = 2^29)
#   dynamics    steps x N x D_in x D_out <= WORK_BUDGET (8 steps at the largest shape; all
#               MAX_STEPS at 1024 x 256 x 128)
#   step        the mixed step and its float32 twin <= STEP_BUDGET, in ``core.settings.cost``'s work
#               (the largest linear step is 2^33; an MLP's N is capped to fit)
# PLAYGROUND_MAX_N, PLAYGROUND_MAX_WIDTH and PLAYGROUND_WORK_FACTOR (which multiplies both
# budgets) raise them for bigger hardware, e.g. PLAYGROUND_WORK_FACTOR=16 on a 16-core CPU or a
# GPU Space.
MAX_N = int(_env_number("PLAYGROUND_MAX_N", 4096))
MAX_WIDTH = int(_env_number("PLAYGROUND_MAX_WIDTH", 1024))
WORK_FACTOR = _env_number("PLAYGROUND_WORK_FACTOR", 1)
SWEEP_BUDGET = int(2**36 * WORK_FACTOR)
WORK_BUDGET = int(2**35 * WORK_FACTOR)
STEP_BUDGET = int(2**35 * WORK_FACTOR)
# torch GradScaler's growth_interval and jmp's period; the page's default is shorter so that
# growth shows within a short run.
LIBRARY_PERIOD = 2000


def steps_within_budget(work: int) -> int:
    """The most training steps of ``work`` multiply-adds each that fit WORK_BUDGET, at most
    MAX_STEPS; 0 when a single step is over it (the run is then refused, not run anyway)."""
    return int(min(MAX_STEPS, WORK_BUDGET // work))


# A user's safetensors file (``core.tensors``): its size and how many tensors it holds, checked
# from the file's size and header before a byte of tensor data is read. The size is the page's
# upload cap (``ui.launch``'s MAX_FILE_SIZE): what a public Space affords to keep on disk for a
# while and read a tensor at a time (a 4096 x 4096 layer in float32 is 64 MB). The work is
# priced by sampling, never refused: at most TENSOR_SAMPLE_VALUES values of a tensor and
# TENSORS_MAX_ELEMENTS of the file are analysed (``core.tensors.reading.sample_size``;
# bench/bench_tensors.py times a file at the caps).
TENSOR_FILE_MAX_BYTES = 80 * 2**20
TENSORS_MAX_COUNT = 512
TENSOR_SAMPLE_VALUES = 2**20
TENSORS_MAX_ELEMENTS = int(2**22 * WORK_FACTOR)
TENSOR_NAME_MAX_CHARS = 256
