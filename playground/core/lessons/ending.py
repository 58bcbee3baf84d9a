"""The route's ending: every compute format on the same default step, NVFP4 last.

Rule: the lesson runs the default step in each compute dtype of the recipe registry (its own
run is NVFP4's, the others it runs itself from the report's config), ordered by the significant
bits of the format their forward operands are stored in (float16 11, bfloat16 8, E4M3 4, E2M1
2: ``jnp.finfo``), and compares each kernel gradient with the float32 twin's (relative error,
in norm). It holds when fewer bits always land further from float32, every format of more bits
below every format of fewer:

    float16 < bfloat16 < every float8 recipe (float8, mxfp8, fp8_block) < nvfp4,

and its own step, the one of fewest bits, still lowers the loss (its new loss below the step's
initial loss, both in float32).
"""

from __future__ import annotations

from playground.core.formats.dtypes import dtype_facts
from playground.core.lessons.claim import Claim, StepLesson, checked
from playground.core.recipes.registry import COMPUTE_DTYPES, recipe
from playground.core.step.report import StepReport, run_report


def significant_bits(compute_dtype: str) -> int:
    """The significant bits (mantissa + the implicit one) of the format ``compute_dtype``'s
    forward operands are stored in (a block recipe's: its elements')."""
    return dtype_facts(recipe(compute_dtype).forward_format).mantissa_bits + 1


def formats() -> tuple[str, ...]:
    """Every compute dtype, most significant bits first (the registry's order among equals)."""
    return tuple(sorted(COMPUTE_DTYPES, key=lambda name: -significant_bits(name)))


def every_format(report: StepReport) -> Claim:
    """The ending's claim on NVFP4's run ``report`` (runs the other formats itself)."""
    own = report.config.compute_dtype
    runs = {
        name: report if name == own else run_report(report.config.replace(compute_dtype=name))
        for name in formats()
    }
    errors = {name: run.kernel.norm_rel_error for name, run in runs.items()}
    bits = {name: significant_bits(name) for name in runs}
    # Every (more bits, fewer bits) pair: the one with fewer bits lands further.
    pairs = [(a, b) for a in runs for b in runs if bits[a] > bits[b]]
    worst = min(pairs, key=lambda pair: errors[pair[1]] - errors[pair[0]])
    before, after = report.mixed_initial_loss_in_float32, report.mixed_new_loss
    ordered = (
        f"fewer bits land further in every pair; closest pair: {worst[0]} ({bits[worst[0]]} "
        f"bits) {errors[worst[0]]:.2g} < {worst[1]} ({bits[worst[1]]} bits) "
        f"{errors[worst[1]]:.2g}"
    )
    listed = ", ".join(f"{errors[name]:.2g} in {name}" for name in runs)
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
            (ordered, all(errors[a] < errors[b] for a, b in pairs)),
            (
                f"fewest bits: {own} ({bits[own]}), alone",
                [name for name in runs if bits[name] <= bits[own]] == [own],
            ),
            (f"{own}'s new loss {after:.5g} < its initial loss {before:.5g}", after < before),
        ],
        short=short,
        figures={
            "errors": errors,
            "bits": bits,
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
