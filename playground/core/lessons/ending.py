"""The route's ending: every compute format on the same default step, NVFP4 last.

Rule: the lesson runs the default step in each of ``FORMATS`` (its own run is NVFP4's, the
others it runs itself from the report's config) and compares each kernel gradient with the
float32 twin's (relative error, in norm). It holds when the errors follow the formats' bits:

    float16 < bfloat16 < every float8 recipe (float8, mxfp8, fp8_block) < nvfp4,

and NVFP4's step still lowers the loss (its new loss below the step's initial loss, both in
float32). The significant bits of each format's elements (float16 11, bfloat16 8, E4M3 4,
E2M1 2) come from ml_dtypes' finfo, so the picture can set them beside the errors.
"""

from __future__ import annotations

from playground.core.formats.dtypes import dtype_facts
from playground.core.lessons.claim import Claim, StepLesson, checked
from playground.core.recipes.registry import recipe
from playground.core.step.report import StepReport, run_report

# The formats, most significant bits first; the float8 recipes between bfloat16 and NVFP4.
FORMATS = ("float16", "bfloat16", "float8", "mxfp8", "fp8_block", "nvfp4")
FLOAT8_RECIPES = ("float8", "mxfp8", "fp8_block")


def significant_bits(compute_dtype: str) -> int:
    """The significant bits (mantissa + the implicit one) of the format ``compute_dtype``'s
    forward operands are stored in (a block recipe's: its elements')."""
    return dtype_facts(recipe(compute_dtype).forward_format).mantissa_bits + 1


def every_format(report: StepReport) -> Claim:
    """The ending's claim on NVFP4's run ``report`` (runs the other formats itself)."""
    runs = {
        name: report
        if name == report.config.compute_dtype
        else run_report(report.config.replace(compute_dtype=name))
        for name in FORMATS
    }
    errors = {name: run.kernel.norm_rel_error for name, run in runs.items()}
    nvfp4 = runs["nvfp4"]
    before, after = nvfp4.mixed_initial_loss_in_float32, nvfp4.mixed_new_loss
    float8 = [errors[name] for name in FLOAT8_RECIPES]
    ordered = (
        f"float16 {errors['float16']:.2g} < bfloat16 {errors['bfloat16']:.2g} < every float8 "
        f"recipe (smallest {min(float8):.2g})"
    )
    listed = ", ".join(f"{errors[name]:.2g} in {name}" for name in FORMATS)
    sentence = (
        f"On the same step the kernel's gradient differs from float32's by {listed} "
        "(relative, in norm): the fewer significant bits a format keeps, the further it lands. "
        "NVFP4 stores 4-bit E2M1 values with one E4M3 scale per 16 and a float32 scale per "
        f"tensor; its step still lowers the loss, from {before:.5g} to {after:.5g}."
    )
    short = (
        "Fewer bits, more error: on the same step the gradient lands further from float32 as "
        "the format shrinks, from float16 and bfloat16 to the float8 recipes, and furthest "
        "with NVFP4's 4-bit values. Even so, NVFP4's step still lowers the loss."
    )
    return checked(
        sentence,
        [
            (ordered, errors["float16"] < errors["bfloat16"] < min(float8)),
            (
                f"every float8 recipe (largest {max(float8):.2g}) < nvfp4 {errors['nvfp4']:.2g}",
                max(float8) < errors["nvfp4"],
            ),
            (f"NVFP4's new loss {after:.5g} < its initial loss {before:.5g}", after < before),
        ],
        short=short,
        figures={
            "errors": errors,
            "bits": {name: significant_bits(name) for name in FORMATS},
            "losses": {
                name: (run.mixed_initial_loss_in_float32, run.mixed_new_loss)
                for name, run in runs.items()
            },
        },
    )


ENDING_LESSONS = (
    StepLesson(
        "every-format",
        "every format on one step, NVFP4 last",
        {"compute_dtype": "nvfp4"},
        "Float32 comparison",
        "example-caption",
        every_format,
    ),
)
