"""The step lessons: one step each, a claim on its report (see ``claim``'s rule).

bfloat16, well behaved       the mixed step follows float32 closely
float16, tiny data, S = 1    gradients of data near 2^-11 flush to zero
same data, S = 2^15          the scale brings every one back, most into the normal range
float16, S = 2^16            the scale does not fit in float16: the gradients are NaN
mxfp8, one outlier in x      per-tensor float8 loses most of x, MXFP8 keeps it (``blocks``)
"""

from __future__ import annotations

import numpy as np

from playground.core.formats.dtypes import classify, dtype_facts, numpy_dtype
from playground.core.lessons.blocks import ONE_OUTLIER, outlier_claim
from playground.core.lessons.claim import Claim, StepLesson, checked
from playground.core.step.report import StepReport

TINY = 2.0**-11  # input and target scale of the tiny-data lessons


def _entries(report: StepReport) -> int:
    return sum(p.size for p in report.params.values())


def _flushed(report: StepReport) -> int:
    return sum(p.underflow_count for p in report.params.values())


def _scaled(report: StepReport) -> np.ndarray:
    return np.concatenate([p.scaled_grads.ravel() for p in report.params.values()])


def _float32_grads(report: StepReport) -> np.ndarray:
    return np.concatenate([p.float32_grads.ravel() for p in report.params.values()])


def _agree(report: StepReport) -> Claim:
    error = report.kernel.norm_rel_error
    difference = report.mixed_new_loss - report.float32_new_loss
    relative = abs(difference) / report.float32_new_loss
    sentence = (
        f"bfloat16 keeps about {dtype_facts('bfloat16').decimal_digits:.1f} significant decimal "
        "digits, yet this step follows float32 closely: "
        f"the kernel's gradient differs from float32's by {error:.2e} (relative, in norm) and the "
        f"new loss by {difference:.3g}. The points of the comparison below sit on the diagonal."
    )
    return checked(
        sentence,
        [
            (f"kernel gradient's relative error {error:.2e} <= 1e-2", error <= 1e-2),
            (f"new losses' relative difference {relative:.2e} <= 1e-2", relative <= 1e-2),
        ],
        short=(
            "bfloat16 keeps only a few significant digits, yet this step follows float32: the "
            "gradient entries land near the diagonal where bfloat16 equals float32, and the new "
            "loss barely differs."
        ),
        figures={"kernel_error": error, "loss_difference": difference, "loss_relative": relative},
    )


def _flush(report: StepReport) -> Claim:
    dtype = report.config.compute_dtype
    flushed, total = _flushed(report), _entries(report)
    median = float(np.median(np.abs(_float32_grads(report))))
    half = dtype_facts(dtype).smallest_subnormal / 2
    sentence = (
        "Inputs and targets of size 2^-11 make gradients too small for float16: float32's "
        f"median gradient magnitude is {median:.3g}, below half of float16's smallest subnormal "
        f"({half:.3g}), which rounds to zero. {flushed:,} of {total:,} gradient entries "
        f"({flushed / total:.0%}) come back as 0 after unscaling (the bars left of the shaded "
        "bands in the figure above), so the optimizer has nothing to apply there. The new loss "
        f"is {report.mixed_new_loss:.4g} against float32's {report.float32_new_loss:.4g} (each "
        "computed in its own precision)."
    )
    return checked(
        sentence,
        [
            (f"median float32 gradient {median:.3g} < {half:.3g}", median < half),
            (f"{flushed} of {total} entries flushed, at least 90%", flushed >= 0.9 * total),
        ],
        short=(
            "With data this small, float16's gradients fall below its smallest subnormal and "
            "round to zero, so the optimizer receives almost nothing: what torch.autocast in "
            "float16 without a GradScaler meets."
        ),
        figures={"flushed": flushed, "total": total, "median": median, "half_subnormal": half},
    )


def _come_back(report: StepReport) -> Claim:
    dtype = report.config.compute_dtype
    counts = classify(_scaled(report), dtype)
    flushed, total = _flushed(report), _entries(report)
    normal, subnormal = counts["normal"], counts["subnormal"]
    smallest_normal = dtype_facts(dtype).smallest_normal
    sentence = (
        "The same tiny data with the loss multiplied by 2^15 before differentiation: "
        f"{flushed:,} entries (of {total:,}) are lost to zero. Of the scaled gradients, "
        f"{normal:,} ({normal / total:.0%}) land in float16's normal range (at least "
        f"{smallest_normal:.3g}) and {subnormal:,} ({subnormal / total:.0%}) are subnormal: kept, "
        "with fewer significant bits (see the bars move right in the figure above). In one step "
        f"the loss itself barely moves (new loss {report.mixed_new_loss:.4g}, float32 "
        f"{report.float32_new_loss:.4g}): what the scale rescued is the gradients; the Training "
        "dynamics lessons show what it does to the training."
    )
    return checked(
        sentence,
        [
            (f"{flushed} of {total} entries flushed, at most 1%", flushed <= 0.01 * total),
            (f"{normal} of {total} scaled entries normal, at least half", 2 * normal >= total),
        ],
        short=(
            "Multiplying the loss by S = 2^15 before the backward pass, as GradScaler's scale "
            "does, lifts the same gradients into float16's range; dividing by S afterwards "
            "gives them back, almost none lost to zero."
        ),
        figures={"flushed": flushed, "total": total, "normal": normal, "subnormal": subnormal},
    )


def _in_dtype(value: float, dtype: str) -> float:
    """``value`` cast to ``dtype`` (inf past its largest value)."""
    with np.errstate(over="ignore"):
        return float(np.asarray(value, np.float64).astype(numpy_dtype(dtype)))


def _overflow(report: StepReport) -> Claim:
    dtype = report.config.compute_dtype
    largest = dtype_facts(dtype).max
    scaled = _scaled(report)
    nan, inf, total = int(np.isnan(scaled).sum()), int(np.isinf(scaled).sum()), scaled.size
    scale = report.config.loss_scale
    # S and the power of two below it as the exercise's float16 loss holds them, and S as
    # torch's GradScaler holds it (float32): (S, dtype, the value held).
    held = [(s, dtype, _in_dtype(s, dtype)) for s in (scale / 2, scale)]
    held.append((scale, "float32", _in_dtype(scale, "float32")))
    sentence = (
        f"float16's largest value is {largest:g}, so S = {scale:g} does not fit in float16 "
        f"at all: {nan + inf:,} of {total:,} scaled gradient entries of the default batch are "
        f"not finite, {nan:,} NaN and {inf:,} inf, so the update is not finite and the new loss is "
        f"{report.mixed_new_loss}. A dynamic loss scale skips such a step and halves S (the "
        "Training dynamics lesson on dynamic scaling shows it)."
    )
    return checked(
        sentence,
        [
            (f"S = {scale:g} > {largest:g}", scale > largest),
            (f"{nan + inf} of {total} scaled entries non-finite", nan + inf == total),
            (
                f"new loss {report.mixed_new_loss} not finite",
                not np.isfinite(report.mixed_new_loss),
            ),
        ],
        short=(
            "The exercise computes the loss in float16, so S = 2^16 itself becomes inf there and "
            "every gradient is inf or NaN. torch.autocast keeps the loss, and GradScaler its "
            "scale, in float32."
        ),
        figures={"largest": largest, "held": held, "nan": nan, "inf": inf, "total": total},
    )


FLOAT16_TINY = {"compute_dtype": "float16", "input_scale": TINY, "target_scale": TINY}
STEP_LESSONS = (
    StepLesson(
        "bfloat16-agrees",
        "bfloat16, well behaved",
        {},
        "Float32 comparison",
        "example-caption",
        _agree,
    ),
    StepLesson(
        "float16-flush",
        "float16, tiny data, S = 1: gradients flush to 0",
        FLOAT16_TINY | {"loss_scale": 1.0},
        None,
        "magnitude-figure",
        _flush,
    ),
    StepLesson(
        "float16-scaled",
        "same data, S = 2^15: the gradients come back",
        FLOAT16_TINY | {"loss_scale": 2.0**15},
        None,
        "magnitude-figure",
        _come_back,
    ),
    StepLesson(
        "float16-overflow",
        "float16, S = 2^16: the scale overflows",
        {"compute_dtype": "float16", "loss_scale": 2.0**16},
        None,
        "magnitude-figure",
        _overflow,
    ),
    StepLesson(
        "block-outlier",
        "one outlier: per-tensor float8 loses x, MXFP8 keeps it",
        ONE_OUTLIER,
        "Block scaling",
        "note-block-scaling",
        outlier_claim,
    ),
)
