"""The route: every lesson, once, in one numbered sequence of short chapters ("Start here").

Rule: a chapter asks one question and answers it with one lesson's run (``lesson``: its settings
are the ones the chapter applies) and the one chart named by ``chart``. A one-step chapter whose
loss barely moves leads on to the training run it changes (``payoff``, a training lesson); a
chapter may also name the run it is read against (``contrast`` for its lesson, ``payoff_contrast``
for its payoff: the same question without the chapter's remedy). Every lesson of the registry
is the lesson or the payoff of exactly one chapter, and the order is the story's: range against
precision, float16 without and with a loss scale, a scale too large, dynamic scaling, bfloat16,
the float32 master weights against pure low precision, float8, block scaling, precision per
operation, the transformer block (float16 and bfloat16 attention, a SwiGLU outlier), and the
ending: every format on one step, NVFP4 last, beside the list of what each chapter showed (a
chapter that ``sums_up`` the route reads every chapter's run).

Pictures (``chart``: the name a chapter's picture of its claim is registered under, in
``sections.route``): for chapters 1-10 ``pictures_step``'s (``agreement``, ``flushed``,
``rescued``, ``scale_overflow``, ``scale_steps``, ``stall_beside``, ``lost_updates_pure``,
``remedy_beside``, ``clipped_steps``); for 11-17 ``pictures_operations``'s: ``block_scales``
(one scale per tensor beside one per block, on the same tensor), ``operations_layernorm``,
``operations_attention`` and ``operations_bfloat16`` (the operations in order against the run
they are read against), ``loss_grid`` (the loss on the compute dtype's values) and
``loss_staircase`` (the loss over the steps, in bfloat16 against float32); and ``ending``'s
``formats`` (every format's gradient error on one step). A training chapter's contrast is a
training run too: the run that stalls without the chapter's remedy.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Chapter:
    """One chapter of the route (see the module rule)."""

    id: str
    title: str
    question: str
    lesson: str
    chart: str
    payoff: str | None = None
    contrast: str | None = None
    payoff_contrast: str | None = None
    sums_up: bool = False


ROUTE = (
    Chapter(
        "range-precision",
        "Range versus precision",
        "bfloat16 has float32's range but keeps only about 2 to 3 significant digits. Does one "
        "training step in bfloat16 still follow the same step in float32?",
        "bfloat16-agrees",
        "agreement",
    ),
    Chapter(
        "float16-no-scale",
        "float16 without a loss scale",
        "float16 keeps more digits than bfloat16 but has a much smaller range. With small data, "
        "what happens to its gradients, and to the training?",
        "float16-flush",
        "flushed",
        payoff="train-float16-unscaled",
    ),
    Chapter(
        "float16-loss-scale",
        "float16 with a loss scale",
        "Multiply the loss by S = 2^15 before differentiating, divide the gradients by S after: "
        "do the gradients come back, and does the run train?",
        "float16-scaled",
        "rescued",
        payoff="train-float16-scaled",
        contrast="float16-flush",
        payoff_contrast="train-float16-unscaled",
    ),
    Chapter(
        "scale-too-large",
        "A scale too large",
        "What if S itself does not fit in float16?",
        "float16-overflow",
        "scale_overflow",
    ),
    Chapter(
        "dynamic-scaling",
        "Dynamic loss scaling",
        "PyTorch's GradScaler starts at S = 2^16, which float16 cannot hold. How does it find a "
        "scale that works?",
        "train-float16-dynamic",
        "scale_steps",
    ),
    Chapter(
        "bfloat16-no-scale",
        "bfloat16 needs no scale",
        "The same batch that stalls float16 at S = 1: does bfloat16 need a loss scale?",
        "train-bfloat16-unscaled",
        "stall_beside",
        contrast="train-float16-unscaled",
    ),
    Chapter(
        "masters-pure",
        "float32 master weights against pure bfloat16",
        "Why keep a float32 copy of the weights? Store them in bfloat16 itself (a pure run) "
        "with a small learning rate and watch the updates.",
        "train-pure-nearest",
        "lost_updates_pure",
    ),
    Chapter(
        "stochastic-rounding",
        "Pure bfloat16, rounded stochastically",
        "Can pure bfloat16 train if the weights are rounded up or down at random instead?",
        "train-pure-stochastic",
        "remedy_beside",
        contrast="train-pure-nearest",
    ),
    Chapter(
        "kahan-summation",
        "Pure bfloat16 with Kahan summation",
        "Or if each rounding error is kept in a second bfloat16 buffer and added back?",
        "train-pure-kahan",
        "remedy_beside",
        contrast="train-pure-nearest",
    ),
    Chapter(
        "float8-delayed",
        "float8 with delayed scaling",
        "float8 scales each tensor by its amax (largest magnitude). Under delayed scaling that "
        "amax comes from the step before: what happens when the gradients jump?",
        "train-float8-delayed",
        "clipped_steps",
    ),
    Chapter(
        "block-scaling",
        "Block scaling",
        "One outlier in the input: what does one scale per tensor cost, against one scale per "
        "block of 32 values (MXFP8)?",
        "block-outlier",
        "block_scales",
    ),
    Chapter(
        "layernorm-float16",
        "Precision per operation: a layer norm",
        "Which operation breaks first when a float16 model's activations grow past 256?",
        "layernorm-overflow",
        "operations_layernorm",
    ),
    Chapter(
        "loss-rounds",
        "Precision per operation: the loss",
        "Does it matter in which dtype the loss itself is computed?",
        "classification-rounds",
        "loss_grid",
    ),
    Chapter(
        "loss-steps",
        "Precision per operation: a loss that moves in steps",
        "What does a loss computed in bfloat16 look like over a few small steps?",
        "bfloat16-loss-steps",
        "loss_staircase",
    ),
    Chapter(
        "attention-float16",
        "The transformer block: float16 attention",
        "In a transformer block without its norms, activations 256 times larger reach the "
        "attention. Which operation overflows first in float16, and does autocast save it?",
        "attention-overflow",
        "operations_attention",
    ),
    Chapter(
        "attention-bfloat16",
        "The transformer block: bfloat16 attention",
        "The same block and batch in bfloat16: do the same scores fit?",
        "bfloat16-attention",
        "operations_bfloat16",
    ),
    Chapter(
        "swiglu-outlier",
        "The transformer block: a SwiGLU outlier",
        "One entry of x 2^10 times the rest, which per-tensor float8 still holds in x. What "
        "does the SwiGLU's gated product make of it, per tensor and per block of 32 (MXFP8)?",
        "swiglu-outlier",
        "block_scales",
    ),
    Chapter(
        "every-format",
        "What the route showed, NVFP4 included",
        "float16, bfloat16, the float8 recipes and NVFP4 (4-bit values, one scale per 16): how "
        "far from float32 does each land on the same step?",
        "every-format",
        "formats",
        sums_up=True,
    ),
)
CHAPTERS = {chapter.id: chapter for chapter in ROUTE}


def taught(chapter: Chapter) -> tuple[str, ...]:
    """The ids of the lessons ``chapter`` teaches: its lesson, then its payoff."""
    return tuple(name for name in (chapter.lesson, chapter.payoff) if name)


def reads(chapter: Chapter) -> tuple[str, ...]:
    """The ids of the lessons whose runs ``chapter`` is drawn from: those it teaches and its
    contrasts; a chapter that sums up the route also reads every chapter's."""
    own = (*taught(chapter), chapter.contrast, chapter.payoff_contrast)
    every = [name for each in ROUTE for name in taught(each)] if chapter.sums_up else []
    return tuple(dict.fromkeys(name for name in (*own, *every) if name))
