"""The block-scaling lesson: one outlier in x against one scale per tensor, and per block.

Rule: the claim is ``core.recipes.block_outliers.outlier_lesson`` on the step's x, as the step's
block report holds it (``StepReport.blocks``): per-tensor float8 flushes or leaves subnormal most of
x's nonzero entries, and MXFP8 keeps at least 90% of them as normal E4M3 numbers. A step whose
recipe is not block-scaled has no block report, and the claim does not hold there.
"""

from __future__ import annotations

from playground.core.lessons.claim import Claim
from playground.core.step.report import StepReport

# One outlier (the share's count rounds up to one entry of the default 256 x 64 batch), 2^16
# times the rest, under MXFP8.
ONE_OUTLIER = {"compute_dtype": "mxfp8", "outlier_share": 1e-5, "outlier_scale": 2.0**16}


def outlier_claim(report: StepReport) -> Claim:
    """The lesson's claim on ``report`` (see the rule)."""
    if report.blocks is None:
        return Claim("", f"{report.config.compute_dtype} is not a block-scaled recipe", False)
    lesson = report.blocks.lesson
    return Claim(lesson.sentence, lesson.condition, lesson.holds)
