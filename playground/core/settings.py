"""The playground's settings: one table of fields, their defaults and their allowed ranges.

Rule: every input a user can set (browser, API, command line, and later the URL) is a field of
:class:`StepConfig`, the training-dynamics settings included. Each field carries a
:class:`Bounds` in its metadata; defaults, validation, the UI's controls and the CLI's flags are
all read from that one table, so a limit or a default is written exactly once. Choices of a
registry (compute dtypes) are read from the registry.

Validation turns any bad value into a :class:`ConfigError` (a ``ValueError``) that names the
field and its allowed range, before any JAX code runs.

Example::

    >>> StepConfig(n=32, d_in=8, d_out=4, loss_scale=1024.0).loss_scale
    1024.0
    >>> StepConfig(n=0)
    Traceback (most recent call last):
    ...
    playground.core.settings.ConfigError: n (batch rows N) must be an integer in [1, 4096]; got 0
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from playground.core.dtypes import COMPUTE_DTYPES
from playground.core.models import ACTIVATIONS, MODELS, ModelChoice
from playground.core.optimizers import OPTIMIZERS

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
SCALING_MODES = ("none", "static", "dynamic")
FP8_SCALINGS = ("none", "current", "delayed")
PURE_ROUNDINGS = ("nearest", "stochastic", "kahan")
MAX_STEPS = 1000


def _env_number(name: str, default: float) -> float:
    """A cap from the environment (to raise it on bigger hardware), or its default."""
    return float(os.environ.get(name, default))


# Work caps of one request, sized for a public Space's 2 vCPUs so that no single request takes
# much more than a few seconds (the largest /step, 4096 x 1024 x 1024, takes about 0.5-1 s):
#   shapes      N <= MAX_N, D_in and D_out <= MAX_WIDTH
#   sweep       scales x N x D_in x D_out <= SWEEP_BUDGET (16 scales at the largest shape;
#               bfloat16's 127 scales up to N x D_in x D_out = 2^29)
#   dynamics    steps x N x D_in x D_out <= WORK_BUDGET (8 steps at the largest shape; all
#               MAX_STEPS at 1024 x 256 x 128)
# PLAYGROUND_MAX_N, PLAYGROUND_MAX_WIDTH and PLAYGROUND_WORK_FACTOR (which multiplies both
# budgets) raise them for bigger hardware, e.g. PLAYGROUND_WORK_FACTOR=16 on a 16-core CPU or a
# GPU Space.
MAX_N = int(_env_number("PLAYGROUND_MAX_N", 4096))
MAX_WIDTH = int(_env_number("PLAYGROUND_MAX_WIDTH", 1024))
WORK_FACTOR = _env_number("PLAYGROUND_WORK_FACTOR", 1)
SWEEP_BUDGET = int(2**36 * WORK_FACTOR)
WORK_BUDGET = int(2**35 * WORK_FACTOR)
# torch GradScaler's growth_interval and jmp's period; the page's default is shorter so that
# growth shows within a short run.
LIBRARY_PERIOD = 2000


class ConfigError(ValueError):
    """A setting outside its allowed range; ``field`` names the offending setting."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Bounds:
    """How one setting is shown and checked: a label, the closed range [low, high], a help line.

    ``integer`` fields accept only whole numbers; ``log`` asks the UI for a log-scale control;
    ``choices`` replaces the range for a categorical field. ``group`` says which part of the
    page owns the control ("step", "data" or "dynamics").
    """

    label: str
    low: float
    high: float
    help: str
    integer: bool = False
    log: bool = False
    choices: tuple[str, ...] = ()
    group: str = "step"

    def describe(self) -> str:
        """The allowed values in words, used in every error message."""
        if self.choices:
            return "one of " + ", ".join(self.choices)
        kind = "an integer" if self.integer else "a finite number"
        return f"{kind} in [{_fmt(self.low)}, {_fmt(self.high)}]"


def _fmt(value: float) -> str:
    """A bound as a person reads it: whole numbers as such, extreme powers of two as 2^k."""
    mantissa, exponent = math.frexp(value)
    if mantissa == 0.5 and abs(exponent - 1) >= 20:
        return f"2^{exponent - 1}"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}"


def _setting(default: Any, bounds: Bounds) -> Any:
    return dataclasses.field(default=default, metadata={"bounds": bounds})


@dataclass(frozen=True)
class StepConfig:
    """A validated, immutable description of one playground run.

    Fields (ranges are in each field's :class:`Bounds`):
      model_seed, data_seed: seeds for the layer's initial weights and for the synthetic batch.
      n, d_in, d_out: x has shape (n, d_in), y has shape (n, d_out), the kernel (d_in, d_out).
      lr: SGD learning rate. loss_scale: the fixed loss scale S.
      input_scale, target_scale: magnitudes of x and y (see ``playground.data``).
      compute_dtype: the low-precision dtype of the forward and backward pass.
      steps, mode, period: a training-dynamics run (see ``playground.sections.dynamics``).
      model, hidden_layers, hidden_width, activation, optimizer: the model and its optimizer.
      fp8_scaling, amax_history: the per-tensor scaling of the float8 recipe.
      pure_rounding: how the pure low-precision run of the dynamics rounds its stored parameters.

    Caps: the largest run (4096 x 1024 x 1024) does about 50 GFLOP of matmuls and holds well
    under 200 MB of arrays, so it finishes in well under a second on a 2-vCPU machine.
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
        "bfloat16",
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
            f"SGD steps per run; at most 2^{math.log2(WORK_BUDGET):.3g} / (N x D_in x D_out) of "
            "them, to keep one run to a few seconds.",
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
        "linear",
        Bounds(
            "model",
            0,
            0,
            "linear: the exercise's nnx.Linear; mlp: linear layers with an activation between.",
            choices=tuple(MODELS),
            group="model",
        ),
    )
    hidden_layers: int = _setting(
        2,
        Bounds("hidden layers", 1, 8, "Hidden layers of the MLP.", True, group="model"),
    )
    hidden_width: int = _setting(
        64,
        Bounds(
            "hidden width", 1, MAX_WIDTH, "Units per hidden layer of the MLP.", True, group="model"
        ),
    )
    activation: str = _setting(
        "relu",
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
        "sgd",
        Bounds(
            "optimizer",
            0,
            0,
            "sgd: optax.sgd (the exercise); momentum: optax.sgd with momentum 0.9; adam: "
            "optax.adam. Its state is float32 in the mixed step.",
            choices=tuple(OPTIMIZERS),
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

    def __post_init__(self) -> None:
        for name, bounds in settings().items():
            object.__setattr__(self, name, check_setting(name, getattr(self, name), bounds))

    @property
    def shape(self) -> tuple[int, int, int]:
        """(N, D_in, D_out)."""
        return (self.n, self.d_in, self.d_out)

    @property
    def model_choice(self) -> ModelChoice:
        """The model and its options (only those that matter for it)."""
        choice = ModelChoice(self.model, self.hidden_layers, self.hidden_width, self.activation)
        return choice.normalized()

    @property
    def model_work(self) -> int:
        """Multiply-adds of one forward matmul pass: N x the sum of the weight matrices' sizes
        (N x D_in x D_out for the linear model). The work caps are counted in these."""
        widths = [self.d_in, self.d_out]
        if self.model == "mlp":
            widths[1:1] = [self.hidden_width] * self.hidden_layers
        return self.n * sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=False))

    @property
    def max_steps(self) -> int:
        """The most training steps allowed for this model and shape (see WORK_BUDGET)."""
        return int(min(MAX_STEPS, max(1, WORK_BUDGET // self.model_work)))

    def check_run(self) -> StepConfig:
        """Self, after checking the cross-field cap of a training run; ConfigError on ``steps``."""
        if self.steps > self.max_steps:
            shape = " x ".join(map(str, self.shape))
            raise ConfigError(
                "steps",
                f"steps (training steps) must be an integer in [1, {self.max_steps}] at "
                f"N x D_in x D_out = {shape} for this model (steps x its multiply-adds, "
                f"{self.model_work:,} a step, <= 2^{math.log2(WORK_BUDGET):.3g}); got "
                f"{self.steps}. Fewer steps or a smaller shape fit.",
            )
        return self

    def replace(self, **changes: Any) -> StepConfig:
        """A new validated config with some fields changed."""
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-able dict."""
        return dataclasses.asdict(self)


def settings() -> dict[str, Bounds]:
    """The table: field name -> Bounds, in declaration order."""
    return {f.name: f.metadata["bounds"] for f in dataclasses.fields(StepConfig)}


def defaults() -> dict[str, Any]:
    """Field name -> default value."""
    return {f.name: f.default for f in dataclasses.fields(StepConfig)}


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters: an error never echoes a huge input back."""
    text = repr(value) if not isinstance(value, int) or abs(value) < 10**30 else "a huge integer"
    return text if len(text) <= limit else text[: limit - 20] + f"... ({len(text):,} chars)"


def _error(name: str, bounds: Bounds, value: Any) -> ConfigError:
    if value is None or value == "":  # a cleared field
        return ConfigError(name, f"{name} ({bounds.label}) is empty: enter {bounds.describe()}")
    return ConfigError(
        name, f"{name} ({bounds.label}) must be {bounds.describe()}; got {shown(value)}"
    )


def check_setting(name: str, value: Any, bounds: Bounds | None = None) -> Any:
    """Return ``value`` coerced to the field's type, or raise ConfigError naming the field.

    Integers accept whole floats such as ``3.0`` (browsers send numbers as floats) but not
    ``3.5``, booleans or strings; floats must be finite and inside the closed range.
    """
    bounds = bounds or settings()[name]
    if bounds.choices:
        if isinstance(value, str) and value in bounds.choices:
            return value
        raise _error(name, bounds, value)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _error(name, bounds, value)
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float is out of every range here
        raise _error(name, bounds, value) from None
    if not math.isfinite(number) or not bounds.low <= number <= bounds.high:
        raise _error(name, bounds, value)
    if bounds.integer:
        if not number.is_integer() and not isinstance(value, numbers.Integral):
            raise _error(name, bounds, value)
        return int(value)
    return number
