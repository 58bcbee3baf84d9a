"""The settings table: every field a user can set, with its default and its allowed range.

Rule: a field is declared once here, in :class:`SettingsTable`, with a :class:`Bounds` in its
metadata (label, range or choices, help line, the part of the page that owns it). Numeric
limits come from ``playground.core.caps``; the choices of a registry (compute dtypes, models,
activations, optimizers), the model's defaults and the models' help lines come from that
registry, so adding an entry there adds it here. Fields are only ever appended: every older
positional call of every endpoint keeps its meaning.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from playground.core.bounds import Bounds, Names
from playground.core.caps import (
    FLOAT32_MAX,
    LIBRARY_PERIOD,
    LOSS_SCALE_MAX,
    LOSS_SCALE_MIN,
    MAX_N,
    MAX_STEPS,
    MAX_WIDTH,
    SEED_MAX,
    WORK_BUDGET,
)
from playground.core.model.losses import TASKS
from playground.core.model.models import ACTIVATIONS, DEFAULT_MODEL, MODELS, NORMS
from playground.core.model.op_policy import PRECISION_POLICIES, PRESETS
from playground.core.model.optimizers import DEFAULT_OPTIMIZER, OPTIMIZERS
from playground.core.model.transformer import MAX_HEADS, MAX_SEQ_LEN
from playground.core.recipes.registry import COMPUTE_DTYPES
from playground.core.settings.block_settings import NVFP4_HADAMARD, OUTLIER_SCALE, OUTLIER_SHARE
from playground.core.settings.state_settings import (
    ACCUMULATION,
    MOMENTS_DTYPE,
    PROMOTION_INTERVAL,
)

SCALING_MODES = ("none", "static", "dynamic")
FP8_SCALINGS = ("none", "current", "delayed")
PURE_ROUNDINGS = ("nearest", "stochastic", "kahan")


def _setting(default: Any, bounds: Bounds) -> Any:
    return dataclasses.field(default=default, metadata={"bounds": bounds})


@dataclass(frozen=True)
class SettingsTable:
    """The fields of a run, each with its default and its :class:`Bounds`; :class:`StepConfig`
    (``playground.core.settings.settings``) is this table with validation, and the only class built
    from it.

    Fields (ranges are in each field's :class:`Bounds`):
      model_seed, data_seed: seeds for the layer's initial weights and for the synthetic batch.
      n, d_in, d_out: x has shape (n, d_in), y has shape (n, d_out), the kernel (d_in, d_out).
      lr: SGD learning rate. loss_scale: the fixed loss scale S.
      input_scale, target_scale: magnitudes of x and y (see ``playground.core.data.synthetic``).
      compute_dtype: the low-precision dtype of the forward and backward pass.
      steps, mode, period: a training-dynamics run (see ``playground.core.runs.train``).
      model, hidden_layers, hidden_width, activation, optimizer: the model and its optimizer.
      fp8_scaling, amax_history: the per-tensor scaling of the float8 recipe.
      pure_rounding: how the pure low-precision run of the dynamics rounds its stored parameters.
      precision_policy, task, norm: the dtype of each kind of operation (``core.model.op_policy``),
        the loss (``core.model.losses``) and the MLP's layer norm (``core.model.models``).
      moments_dtype, accumulation, promotion_interval: the optimizer state's storage dtype and
        the matmuls' accumulation (``core.settings.state_settings``).
      seq_len, heads: the transformer's tokens per sequence and attention heads
        (``core.model.transformer``; heads must divide hidden_width).
    """

    model_seed: int = _setting(
        0,
        Bounds(
            "model seed",
            0,
            SEED_MAX,
            "Seeds nnx.Rngs for the layer's initial weights.",
            True,
        ),
    )
    n: int = _setting(256, Bounds("batch rows N", 1, MAX_N, "Rows in the batch.", True))
    d_in: int = _setting(
        64, Bounds("input width D_in", 1, MAX_WIDTH, "Features per row of x.", True)
    )
    d_out: int = _setting(
        16, Bounds("output width D_out", 1, MAX_WIDTH, "Targets per row of y.", True)
    )
    lr: float = _setting(
        0.1,
        Bounds(
            "learning rate",
            0.0,
            FLOAT32_MAX,
            "SGD step size; 0 leaves the parameters unchanged.",
        ),
    )
    loss_scale: float = _setting(
        1024.0,
        Bounds(
            "loss scale",
            LOSS_SCALE_MIN,
            LOSS_SCALE_MAX,
            "The loss is multiplied by this before differentiation and the gradients divided by "
            "it after.",
            log=True,
        ),
    )
    data_seed: int = _setting(
        0, Bounds("data seed", 0, SEED_MAX, "Seeds the synthetic batch x, y.", True, group="data")
    )
    input_scale: float = _setting(
        1.0,
        Bounds(
            "input scale",
            2.0**-64,
            2.0**64,
            "Typical magnitude of the entries of x.",
            log=True,
            group="data",
        ),
    )
    target_scale: float = _setting(
        1.0,
        Bounds(
            "target scale",
            2.0**-64,
            2.0**64,
            "Typical magnitude of the entries of y.",
            log=True,
            group="data",
        ),
    )
    compute_dtype: str = _setting(
        COMPUTE_DTYPES[0],  # the exercise's recipe, bfloat16
        Bounds(
            "compute dtype",
            0,
            0,
            "The low-precision dtype of the forward and backward pass; parameters stay float32.",
            choices=COMPUTE_DTYPES,
        ),
    )
    steps: int = _setting(
        200,
        Bounds(
            "training steps",
            1,
            MAX_STEPS,
            f"SGD steps per run; at most 2^{math.log2(WORK_BUDGET):.3g} / (one step's work: "
            "N x the model's multiply-adds, plus its parameter updates) of them, to keep one run "
            "to a few seconds.",
            integer=True,
            group="dynamics",
        ),
    )
    mode: str = _setting(
        "static",
        Bounds(
            "loss scaling",
            0,
            0,
            "none: S = 1; static: the loss scale above; dynamic: starts there.",
            choices=SCALING_MODES,
            group="dynamics",
        ),
    )
    period: int = _setting(
        100,
        Bounds(
            "growth period",
            1,
            10**6,
            f"Finite steps before a dynamic scale doubles. PyTorch's GradScaler and jmp default "
            f"to {LIBRARY_PERIOD}; a shorter period shows the growth within a short run.",
            integer=True,
            group="dynamics",
        ),
    )

    # The model and optimizer come last, after the run settings, so that every older positional
    # call of every endpoint keeps its meaning (they were added after the others).
    model: str = _setting(
        DEFAULT_MODEL.name,
        Bounds(
            "model",
            0,
            0,
            "; ".join(f"{name}: {spec.about}" for name, spec in MODELS.items()) + ".",
            choices=Names(MODELS),
            group="model",
        ),
    )
    hidden_layers: int = _setting(
        DEFAULT_MODEL.hidden_layers,
        Bounds("hidden layers", 1, 8, "Hidden layers of the MLP.", True, group="model"),
    )
    hidden_width: int = _setting(
        DEFAULT_MODEL.hidden_width,
        Bounds(
            "hidden width",
            1,
            MAX_WIDTH,
            "Units per hidden layer of the MLP; the transformer's d_model (its SwiGLU is twice "
            "as wide).",
            True,
            group="model",
        ),
    )
    activation: str = _setting(
        DEFAULT_MODEL.activation,
        Bounds(
            "activation",
            0,
            0,
            "The MLP's activation after every layer but the last.",
            choices=tuple(ACTIVATIONS),
            group="model",
        ),
    )
    optimizer: str = _setting(
        DEFAULT_OPTIMIZER,
        Bounds(
            "optimizer",
            0,
            0,
            "; ".join(f"{name}: {spec.about}" for name, spec in OPTIMIZERS.items())
            + ". Its state is float32 in the mixed step.",
            choices=Names(OPTIMIZERS),
            group="model",
        ),
    )
    # The float8 recipe's scaling and the pure run's rounding were added after the model, so they
    # come after it (older positional calls keep their meaning).
    fp8_scaling: str = _setting(
        "current",
        Bounds(
            "float8 scaling",
            0,
            0,
            "float8 only. none: tensors are cast as they are; current: each tensor is multiplied "
            "by format max / its amax before the cast (this step's amax); delayed: the amax is the "
            "largest over the last amax_history steps, as NVIDIA TransformerEngine does.",
            choices=FP8_SCALINGS,
            group="float8",
        ),
    )
    amax_history: int = _setting(
        16,
        Bounds(
            "amax history",
            1,
            1024,
            "float8 with delayed scaling: how many past steps' amax values the scale is taken "
            "from.",
            True,
            group="float8",
        ),
    )
    pure_rounding: str = _setting(
        "nearest",
        Bounds(
            "pure-run rounding",
            0,
            0,
            "How the pure low-precision run stores p + update. nearest: round to nearest even "
            "(plain casts); stochastic: round up with probability equal to the remainder's share "
            "of the gap; kahan: keep the rounding error in a compensation buffer and add it back "
            "next step.",
            choices=PURE_ROUNDINGS,
            group="dynamics",
        ),
    )
    # Precision per operation, the task and the norm came last: appended, with defaults that
    # keep every number the step showed before.
    precision_policy: str = _setting(
        PRECISION_POLICIES[0],  # exercise: every operation in the compute dtype
        Bounds(
            "precision per operation",
            0,
            0,
            "; ".join(f"{name}: {p.about}" for name, p in PRESETS.items()) + ".",
            choices=PRECISION_POLICIES,
        ),
    )
    task: str = _setting(
        TASKS[0],
        Bounds(
            "task",
            0,
            0,
            "regression: the MSE against y (the exercise); classification: softmax "
            "cross-entropy over D_out classes (a max-subtracted log_softmax), labels from the "
            "data seed; larger input scales give larger logits.",
            choices=TASKS,
        ),
    )
    norm: str = _setting(
        DEFAULT_MODEL.norm,
        Bounds(
            "normalisation",
            0,
            0,
            "MLP and transformer. layernorm: flax nnx.LayerNorm (float32 scale and bias) before "
            "each hidden activation of the MLP, or before the transformer's attention and MLP "
            "(pre-norm), computed in the precision policy's normalisation dtype.",
            choices=NORMS,
            group="model",
        ),
    )
    outlier_share: float = _setting(
        0.0, OUTLIER_SHARE
    )  # block scaling (core.settings.block_settings)
    outlier_scale: float = _setting(OUTLIER_SCALE.high, OUTLIER_SCALE)
    nvfp4_hadamard: str = _setting("on", NVFP4_HADAMARD)
    # The optimizer state's and the accumulator's precision (core.settings.state_settings).
    moments_dtype: str = _setting(MOMENTS_DTYPE.choices[0], MOMENTS_DTYPE)
    accumulation: str = _setting(ACCUMULATION.choices[0], ACCUMULATION)
    promotion_interval: int = _setting(0, PROMOTION_INTERVAL)
    # The transformer's sequence length and heads (issue 36), appended last.
    seq_len: int = _setting(
        DEFAULT_MODEL.seq_len,
        Bounds(
            "sequence length",
            1,
            MAX_SEQ_LEN,
            "Transformer only. Tokens per sequence: consecutive batch rows form sequences of this "
            "many tokens (the last one shorter when it does not divide N), each attending "
            "causally to its own earlier tokens.",
            True,
            group="model",
        ),
    )
    heads: int = _setting(
        DEFAULT_MODEL.heads,
        Bounds(
            "attention heads",
            1,
            MAX_HEADS,
            "Transformer only. Attention heads; each has hidden_width / heads features, so heads "
            "must divide hidden_width.",
            True,
            group="model",
        ),
    )
