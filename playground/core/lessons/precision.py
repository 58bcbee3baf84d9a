"""The lessons of precision per operation, each a claim checked against its own numbers.

    float16 layer norm       at activations past sqrt(65504) ~ 256, the variance computed in
                             float16 (exercise) is inf and the norm is the first non-finite
                             operation; under autocast (the norm in float32) every operation
                             stays finite
    classification loss      the same logits give a softmax cross-entropy in bfloat16 that
                             differs visibly from the one in float32: the loss rounds (the
                             softmax is max-subtracted, so nothing overflows)
    bfloat16 loss steps      over a short run the loss the step computes in bfloat16 stays put
                             for several steps and then jumps by a bfloat16 spacing; computed in
                             float32 (autocast) it changes at every step

Each is a ``StepLesson`` (``core.lessons.claim``): settings overriding the defaults and a
function of the lesson's step report returning the claim sentence, written from the numbers,
and the condition it rests on; a lesson whose condition fails is not taught. A lesson that
compares presets runs the other preset itself, from the report's own config. Each claim's
``figures`` hold what the route's picture draws: the layer norm's autocast operations
(``contrast``) and the sizes compared; the bfloat16 values around the two losses (``grid``);
the two loss curves.
"""

from __future__ import annotations

import math

import jax
import numpy as np
import optax
from flax import nnx

from playground.core.data.synthetic import make_batch
from playground.core.formats.dtypes import dtype_facts, numpy_dtype
from playground.core.lessons.claim import Claim, StepLesson, checked
from playground.core.model.models import ModelChoice, build_model
from playground.core.settings.settings import StepConfig
from playground.core.step.compiled import program, run_compiled
from playground.core.step.loss_scale import StaticLossScale
from playground.core.step.policy import Policy, policy_for
from playground.core.step.report import StepReport, run_report
from playground.core.step.step import step_trace

LAYERNORM = dict(
    compute_dtype="float16", model="mlp", hidden_layers=1, norm="layernorm", input_scale=256.0
)
CLASSIFICATION = {"task": "classification", "input_scale": 8.0}
LOSS_STEPS = {"lr": 0.005}
CURVE_STEPS = 24


def _largest_first_layer_output(report: StepReport) -> float:
    """max |x @ W0 + b0| of the mixed step's first layer, in float64 from the report's own
    parameters and batch (before any rounding: the size the norm is given)."""
    x, _ = make_batch(report.config)
    kernel = report.params["layers.0.kernel"].before.astype(np.float64)
    bias = report.params["layers.0.bias"].before.astype(np.float64)
    return float(np.max(np.abs(x.astype(np.float64) @ kernel + bias)))


def layernorm_overflow(report: StepReport) -> Claim:
    """The float16 layer-norm lesson's claim on its exercise run (runs autocast itself)."""
    dtype = report.config.compute_dtype
    largest = dtype_facts(dtype).max
    bound = math.sqrt(largest)
    activation = _largest_first_layer_output(report)
    autocast = run_report(report.config.replace(precision_policy="autocast"))
    first = report.first_nonfinite["forward"]
    norm_name = next((op.name for op in report.operations if op.kind == "normalisation"), None)
    names = [op.name for op in report.operations]
    after = report.operations[names.index(first) + 1 :] if first in names else ()
    sentence = (
        f"The first layer's outputs reach {activation:.0f}; squared, anything past {bound:.1f} "
        f"is beyond {dtype}'s largest value {largest:g}. Under exercise the layer norm computes "
        f"its variance, mean(x^2) - mean^2, in {dtype}: it is inf, and {first} is the first "
        "operation whose result is not finite."
    )
    if after and all(op.forward_finite for op in after):
        # rsqrt(inf) = 0: the rows whose variance overflowed leave the norm as its bias.
        sentence += (
            " Its output is finite even so, since 1 / sqrt(inf) = 0 turns the rows whose "
            "variance overflowed into zeros (plus the norm's bias): the operations after it and "
            f"the loss ({report.mixed_initial_loss_in_compute_dtype:.7g} in {dtype}) stay "
            "finite, but those rows reach them with their inputs erased."
        )
    sentence += (
        " Under autocast the same norm computes in float32 (as torch's CPU layer_norm does "
        "inside) and every operation of the step stays finite."
    )
    short = (
        f"Activations past the square root of {dtype}'s largest value overflow when squared, so "
        f"a layer norm's variance computed in {dtype} is the first inf. torch.autocast runs "
        "layer_norm in float32, and every operation stays finite."
    )
    return checked(
        sentence,
        [
            (f"largest first-layer output {activation:.4g} > {bound:.4g}", activation > bound),
            (f"exercise's first non-finite operation {first} is the norm", first == norm_name),
            (
                f"autocast's first non-finite operations {autocast.first_nonfinite}: none",
                autocast.first_nonfinite == {"forward": None, "backward": None},
            ),
        ],
        short=short,
        figures={
            "largest_activation": activation,
            "bound": bound,
            "largest_value": largest,
            "contrast": autocast.operations,
            "contrast_first": autocast.first_nonfinite["forward"],
        },
    )


def neighbours(low: float, high: float, dtype: str, margin: int = 2) -> np.ndarray:
    """Every ``dtype`` value from ``margin`` below min(low, high) to ``margin`` above the max,
    in float64 (both positive: the values are consecutive bit patterns)."""
    bits = np.asarray([min(low, high), max(low, high)], numpy_dtype(dtype)).view(np.uint16)
    patterns = np.arange(int(bits[0]) - margin, int(bits[1]) + margin + 1, dtype=np.uint16)
    return patterns.view(numpy_dtype(dtype)).astype(np.float64)


def classification_rounding(report: StepReport) -> Claim:
    """The classification lesson's claim: the loss of the same logits in both dtypes."""
    dtype = report.config.compute_dtype
    low = report.mixed_initial_loss_in_compute_dtype
    high = report.mixed_initial_loss_in_float32
    relative = abs(low - high) / abs(high)
    spacing = float(np.spacing(np.asarray(low, numpy_dtype(dtype))))
    sentence = (
        f"The same logits give a softmax cross-entropy of {high:.6g} computed in float32 and "
        f"{low:.6g} computed in {dtype}, {relative:.2%} apart. The softmax is max-subtracted "
        "(log_softmax: x - max - log(sum(exp(x - max)))), so nothing overflowed: the loss "
        f"itself rounds, and near {low:.3g} neighbouring {dtype} values are {spacing:g} apart. "
        "Under autocast the step's loss is the float32 one."
    )
    return checked(
        sentence,
        [
            (f"both losses finite ({low}, {high})", math.isfinite(low) and math.isfinite(high)),
            (f"relative difference {relative:.2e} >= 1e-3", relative >= 1e-3),
        ],
        short=(
            f"The same logits give a different cross-entropy in {dtype} than in float32. Nothing "
            f"overflows: the loss itself rounds to a {dtype} value. Under torch.autocast the "
            "loss is computed in float32."
        ),
        figures={
            "grid": neighbours(low, high, dtype),
            "spacing": spacing,
            "relative": relative,
        },
    )


@program(static_argnames=("steps", "precision", "model"))
def _step_losses(model_seed, x, y, lr, loss_scale, *, steps: int, precision: Policy, model):
    """The loss each of ``steps`` SGD steps computes before its update: the one mixed-precision
    rule (``core.step.step.step_trace``) at a fixed loss scale, in a ``lax.scan``."""
    network = build_model(model, x.shape[-1], y.shape[-1], nnx.Rngs(jax.random.key(model_seed)))
    graphdef, params = nnx.split(network, nnx.Param)
    sgd = optax.sgd(lr)

    def one_step(params, _):
        stepped = nnx.merge(graphdef, params)
        trace = step_trace(
            stepped, sgd, x, y, StaticLossScale(loss_scale), precision, new_loss=False
        )
        return nnx.state(stepped, nnx.Param), trace.initial_loss[0]

    return jax.lax.scan(one_step, params, None, length=steps)[1]


def step_loss_curve(config: StepConfig, steps: int = CURVE_STEPS) -> np.ndarray:
    """The loss the mixed step computes at each of ``steps`` SGD steps of ``config``."""
    choice: ModelChoice = config.model_choice
    return run_compiled(
        _step_losses, config, steps=steps, precision=policy_for(config), model=choice
    )


def loss_steps(report: StepReport) -> Claim:
    """The bfloat16 loss-curve lesson's claim (runs both presets' curves itself)."""
    exercise = step_loss_curve(report.config.replace(precision_policy="exercise"))
    autocast = step_loss_curve(report.config.replace(precision_policy="autocast"))
    levels, moves = len(np.unique(exercise)), len(np.unique(autocast))
    jump = float(np.max(np.abs(np.diff(exercise))))
    dtype = report.config.compute_dtype
    spacing = float(np.spacing(np.asarray(exercise[-1], numpy_dtype(dtype))))
    steps = exercise.size
    sentence = (
        f"Over {steps} SGD steps the loss the step computes in {dtype} (exercise) takes only "
        f"{levels} distinct values: it stays put for several steps, then jumps (by up to "
        f"{jump:.3g}; near {exercise[-1]:.3g} neighbouring {dtype} values are {spacing:g} "
        f"apart). Computed in float32 from the same kind of {dtype} outputs (autocast), it "
        f"takes {moves} values and falls smoothly from {autocast[0]:.5g} to {autocast[-1]:.5g}."
    )
    return checked(
        sentence,
        [
            (f"exercise: {levels} distinct of {steps} <= {steps // 2}", levels <= steps // 2),
            (f"autocast: {moves} distinct of {steps} >= {steps - 1}", moves >= steps - 1),
        ],
        short=(
            f"Computed in {dtype}, the loss over small steps sits still, then jumps between "
            f"{dtype} values: a staircase. Computed in float32 from the same {dtype} outputs, "
            "as under torch.autocast, it falls smoothly."
        ),
        figures={
            "exercise": exercise,
            "autocast": autocast,
            "levels": levels,
            "moves": moves,
            "jump": jump,
            # The step (counting from 1) whose loss is the largest jump from the step before.
            "jump_step": int(np.argmax(np.abs(np.diff(exercise)))) + 2,
            "spacing": spacing,
        },
    )


PRECISION_LESSONS = (
    StepLesson(
        "layernorm-overflow",
        "float16 layer norm: the variance overflows",
        LAYERNORM,
        None,
        "operations-table",
        layernorm_overflow,
    ),
    StepLesson(
        "classification-rounds",
        "classification: the loss itself rounds",
        CLASSIFICATION,
        None,
        "operations-table",
        classification_rounding,
    ),
    StepLesson(
        "bfloat16-loss-steps",
        "bfloat16 loss moves in steps",
        LOSS_STEPS,
        None,
        "operations-table",
        loss_steps,
    ),
)
