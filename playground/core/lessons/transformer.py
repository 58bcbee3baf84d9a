"""The transformer block's lessons (``model=transformer``), each a claim checked on its own run.

    float16 attention        norm = none, input_scale = 256: the attention scores
                             (q / sqrt(d_head)) . k pass float16's 65504, and under exercise
                             (attention in float16) they are the first operation whose result
                             is not finite; under autocast the attention computes in float32
                             (as the CPU kernel of torch's scaled_dot_product_attention does) and
                             the scores are finite, while the SwiGLU's product, which autocast
                             keeps in float16 and which grows with the same square, may still
                             overflow further on (the sentence names what does)
    bfloat16 attention       the same settings in bfloat16: every operation of the step finite,
                             forward and backward, where float16's first non-finite operation
                             is the attention scores
    SwiGLU outlier           one outlier entry in x, 2^10 times the rest, which per-tensor float8
                             holds in x itself (more than 90% of x's entries stay normal): the
                             gated product m = silu(g) * u (the mlp.down matmul's input) squares
                             it, and per-tensor float8 (current scaling) flushes most of m's
                             other entries to zero, while MXFP8 (a scale per 32 values) keeps at
                             least 90% of them as normal E4M3 numbers

Why norm = none: the block's pre-norms (norm = layernorm) give the attention normalised
activations, so q and k stay near the size of their weights whatever x's scale; without them
the raw residual stream reaches the attention, and a score, a sum of products of q and k,
grows with the square of the activations (as the gated product does). The settings are the
spec's (``core.model.transformer``); everything a claim compares is computed from the lesson's
own config: the block's initial parameters, its batch, and its step reports. Each claim's
``figures`` hold what the route's picture draws: the largest score and the operations of the
run it is read against (``contrast``: autocast, or float16), or the gated product's two
scalings (``core.lessons.blocks.scale_figures``).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from playground.core.data.synthetic import make_batch
from playground.core.formats.dtypes import dtype_facts
from playground.core.lessons.blocks import scale_figures
from playground.core.lessons.claim import Claim, StepLesson, checked
from playground.core.model.models import initial_state, rebuilt
from playground.core.model.op_policy import EXERCISE_OPS, OpRun
from playground.core.recipes.block_formats import MXFP8
from playground.core.recipes.block_outliers import lost_share, normal_share
from playground.core.recipes.block_stats import per_tensor_float8_stats, recipe_operand_stats
from playground.core.settings.settings import StepConfig
from playground.core.step.report import StepReport, run_report

SCORES, SOFTMAX = "attention scores", "softmax"
# The attention lessons' block: no norms, activations 256 times the default's, and a learning
# rate small enough for a loss near 1e10 (lr = 0.1 sends float32's own step to NaN).
ATTENTION = dict(model="transformer", norm="none", input_scale=256.0, lr=1e-10)
FLOAT16_ATTENTION = ATTENTION | {"compute_dtype": "float16"}
BFLOAT16_ATTENTION = ATTENTION | {"compute_dtype": "bfloat16"}
# One outlier entry of x (the share rounds up to one entry), 2^10 times the rest, under MXFP8,
# with the attention lessons' learning rate: the loss starts near 1e7, and at lr = 0.1 (down to
# 1e-8) the step sends both losses, float32's too, to inf or NaN, which the chapter would show
# beside a claim about quantizing the block's tensors as it starts (which no lr changes).
SWIGLU_OUTLIER = dict(
    model="transformer",
    compute_dtype="mxfp8",
    outlier_share=1e-5,
    outlier_scale=2.0**10,
    lr=1e-10,
)
# The SwiGLU lesson's thresholds: per-tensor float8 keeps x (loses at most X_LOST_MAX of it),
# flushes most of m to zero, and MXFP8 keeps nearly all of m as normal numbers.
X_LOST_MAX = 0.1
M_FLUSHED_MIN = 0.5
MXFP8_NORMAL_MIN = 0.9


@functools.lru_cache(maxsize=8)
def block_tensors(config: StepConfig) -> dict[str, np.ndarray]:
    """The block's tensors as its step starts, in float32 (every operation in float32, from
    the model's own modules, its initial parameters and batch): ``x``, the attention ``scores``
    (sequences, heads, T, T) with the masked entries 0, and the gated product ``m`` (the
    mlp.down matmul's input). Only for norm = none, the lessons' block (no norm between)."""
    choice = config.model_choice
    if choice.norm != "none":
        raise ValueError(f"block_tensors: norm must be 'none', not {choice.norm!r}")
    state = initial_state(
        np.uint32(config.model_seed), choice=choice, d_in=config.d_in, d_out=config.d_out
    )
    model = rebuilt(choice, config.d_in, config.d_out, state)
    x = jnp.asarray(make_batch(config)[0], jnp.float32)
    ops = OpRun(EXERCISE_OPS, "float32")
    h = model.embed(x)
    attention = model.attention
    rows, d = h.shape
    t, heads = choice.seq_len, choice.heads
    padded = -(-rows // t) * t

    def split(a: jax.Array) -> jax.Array:
        return jnp.pad(a, ((0, padded - rows), (0, 0))).reshape(padded // t, t, heads, d // heads)

    q, k = split(attention.query(h)), split(attention.key(h))
    scores = jnp.einsum("sqhd,skhd->shqk", q / jnp.sqrt(jnp.float32(d // heads)), k)
    scores = jnp.where(jnp.tril(jnp.ones((t, t), bool)), scores, 0.0)
    h = h + attention.out(attention.mix(h, ops, t, heads))
    m = jax.nn.silu(model.mlp.gate(h)) * model.mlp.up(h)
    return {"x": np.asarray(x), "scores": np.asarray(scores), "m": np.asarray(m)}


def _row(report: StepReport, name: str):
    return next(op for op in report.operations if op.name == name)


def attention_overflow(report: StepReport) -> Claim:
    """The float16 attention lesson's claim on its exercise run (runs autocast itself)."""
    dtype = report.config.compute_dtype
    largest = dtype_facts(dtype).max
    score = float(np.max(np.abs(block_tensors(report.config)["scores"])))
    first = report.first_nonfinite["forward"]
    autocast = run_report(report.config.replace(precision_policy="autocast"))
    scores, softmax = _row(autocast, SCORES), _row(autocast, SOFTMAX)
    then = autocast.first_nonfinite["forward"]
    after = (
        "every operation of the forward pass is finite"
        if then is None
        else f"the first operation whose result is not finite is now {then}, computed in "
        f"{_row(autocast, then).dtype} under autocast too"
    )
    if then == "swiglu":
        after += (
            " (the gated product silu(g) * u grows with the same square, and torch's autocast "
            "has no float32 rule for it)"
        )
    short = (
        "Attention scores grow with the square of the activations: in "
        f"{dtype} they pass its largest value, the first inf. Autocast computes attention in "
        "float32, as torch's scaled_dot_product_attention does inside, and holds them"
    )
    short += (
        "." if then is None else f", but {then}, still {_row(autocast, then).dtype}, overflows."
    )
    sentence = (
        f"Without the block's norms (norm = none) the attention sees the raw residual stream, "
        f"and at input_scale {report.config.input_scale:g} its scores (q / sqrt(d_head)) . k "
        f"reach {score:.4g}, past {dtype}'s largest value {largest:g}: a score is a sum of "
        "products of q and k, so it grows with the square of the activations (pre-norms keep "
        f"q and k small). Under exercise the scores are computed in {dtype}, and {first} is "
        "the first operation whose result is not finite. Under autocast the attention (scores, "
        "softmax, values) computes in float32, as the CPU kernel of torch's "
        "scaled_dot_product_attention does before rounding its output: the scores and the "
        f"softmax are finite; {after}."
    )
    return checked(
        sentence,
        [
            (f"largest score {score:.4g} > {largest:g}", score > largest),
            (f"exercise's first non-finite operation {first} is {SCORES}", first == SCORES),
            (
                (
                    f"autocast's {SCORES} in {scores.dtype}, finite: {scores.forward_finite}; "
                    f"{SOFTMAX} finite: {softmax.forward_finite}"
                ),
                scores.dtype == "float32" and scores.forward_finite and softmax.forward_finite,
            ),
        ],
        short=short,
        figures={
            "largest_score": score,
            "largest_value": largest,
            "contrast": autocast.operations,
            "contrast_first": then,
        },
    )


def bfloat16_attention(report: StepReport) -> Claim:
    """The bfloat16 attention lesson's claim on its run (runs float16 itself)."""
    dtype = report.config.compute_dtype
    score = float(np.max(np.abs(block_tensors(report.config)["scores"])))
    float16 = run_report(report.config.replace(compute_dtype="float16"))
    first16 = float16.first_nonfinite["forward"]
    relative = abs(report.mixed_initial_loss - report.float32_initial_loss) / abs(
        report.float32_initial_loss
    )
    new, new32 = report.mixed_new_loss, report.float32_new_loss
    new_relative = abs(new - new32) / abs(new32)
    sentence = (
        f"The same block, batch and policy (exercise: the attention in {dtype} too) in {dtype}: "
        f"the scores reach {score:.4g} again, and {dtype}, with float32's 8 exponent bits "
        f"(largest value {dtype_facts(dtype).max:.3g}), holds them. Every operation of the "
        f"step stays finite, forward and backward, where float16's first non-finite operation "
        f"is {first16}; the loss, {report.mixed_initial_loss:.4g}, is {relative:.2%} from "
        f"float32's {report.float32_initial_loss:.4g}, and after the step {new:.4g} against "
        f"float32's {new32:.4g} ({dtype} keeps fewer digits: it rounds, it does not overflow)."
    )
    return checked(
        sentence,
        [
            (
                f"{dtype}'s first non-finite operations {report.first_nonfinite}: none",
                report.first_nonfinite == {"forward": None, "backward": None},
            ),
            (f"float16's first non-finite operation {first16} is {SCORES}", first16 == SCORES),
            (f"initial loss {relative:.2e} from float32's <= 5e-2", relative <= 5e-2),
            (f"new loss {new_relative:.2e} from float32's <= 5e-2", new_relative <= 5e-2),
        ],
        short=(
            f"The same block in {dtype}: with float32's range it holds the scores that overflow "
            "float16, every operation stays finite, forward and backward, and the loss only "
            "rounds."
        ),
        figures={
            "largest_score": score,
            "largest_value": dtype_facts(dtype).max,
            "contrast": float16.operations,
            "contrast_dtype": float16.config.compute_dtype,
            "contrast_first": first16,
            "loss": report.mixed_initial_loss,
            "float32_loss": report.float32_initial_loss,
            "relative": relative,
        },
    )


def _flushed(stats) -> float:
    return stats.counts["flushed"] / stats.nonzero


def swiglu_outlier(report: StepReport) -> Claim:
    """The SwiGLU outlier lesson's claim (the statistics of x and m measured here)."""
    tensors = block_tensors(report.config)
    x, m = tensors["x"], tensors["m"]
    x_lost = lost_share(per_tensor_float8_stats(x))
    per_tensor = per_tensor_float8_stats(m)
    flushed, lost = _flushed(per_tensor), lost_share(per_tensor)
    mxfp8 = recipe_operand_stats(m, MXFP8, "input")
    kept, mx_flushed = normal_share(mxfp8), _flushed(mxfp8)

    def spread(t: np.ndarray) -> float:
        return float(np.max(np.abs(t)) / np.median(np.abs(t[t != 0])))

    sentence = (
        f"One entry of x is {report.config.outlier_scale:g} times the rest: its largest entry "
        f"is {spread(x):.3g} times the median, and per-tensor float8 (one scale, set by the "
        f"largest entry) still keeps x, losing only {x_lost:.1%} of it. The SwiGLU multiplies "
        "two projections of the same token, silu(g) * u, so the gated product (the input of "
        "mlp.down) grows with the square of the outlier token's activations: its largest entry "
        f"is {spread(m):.3g} times the median. "
        f"Per-tensor float8 (current scaling) flushes {flushed:.1%} of its nonzero entries to "
        f"zero ({lost:.1%} flushed or subnormal); MXFP8 (one scale per 32 values) flushes "
        f"{mx_flushed:.1%} and keeps {kept:.1%} as normal E4M3 numbers."
    )
    return checked(
        sentence,
        [
            (f"per-tensor float8 lost {x_lost:.1%} of x <= {X_LOST_MAX:.0%}", x_lost <= X_LOST_MAX),
            (
                f"per-tensor float8 flushed {flushed:.1%} of m > {M_FLUSHED_MIN:.0%}",
                flushed > M_FLUSHED_MIN,
            ),
            (f"MXFP8 kept {kept:.1%} of m >= {MXFP8_NORMAL_MIN:.0%}", kept >= MXFP8_NORMAL_MIN),
        ],
        short=(
            "Per-tensor float8 still holds x with its one outlier. The SwiGLU's gated product, "
            "mlp.down's input, squares it: one scale per tensor flushes most of that input to "
            "zero, while MXFP8's scale per block keeps nearly all."
        ),
        figures=scale_figures(per_tensor, mxfp8, "mlp.down's input m = silu(g) * u")
        | {"x_lost": x_lost},
    )


TRANSFORMER_LESSONS = (
    StepLesson(
        "attention-overflow",
        "float16 attention: the scores overflow",
        FLOAT16_ATTENTION,
        None,
        "operations-table",
        attention_overflow,
    ),
    StepLesson(
        "bfloat16-attention",
        "bfloat16 attention: the same scores fit",
        BFLOAT16_ATTENTION,
        None,
        "operations-table",
        bfloat16_attention,
    ),
    StepLesson(
        "swiglu-outlier",
        "SwiGLU squares an outlier: float8 per tensor against MXFP8",
        SWIGLU_OUTLIER,
        "Block scaling",
        "note-block-scaling",
        swiglu_outlier,
    ),
)
