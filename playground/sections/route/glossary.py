"""The page's glossary: every term of art the page uses, in a sentence or two, linked from the
page's first words (``LINK``) and from the route's chapters."""

from __future__ import annotations

from playground.core.formats.dtypes import dtype_facts
from playground.core.recipes.registry import listed_recipes, recipe
from playground.sections.step.tab import PYTORCH_LINE

# The small formats the glossary's E4M3, E5M2, E2M1 entry describes, with their largest values.
SMALL_FORMATS = ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn")


def _name(fmt: str) -> str:
    """``float8_e4m3fn`` -> ``float8 E4M3``: the family and the exponent-mantissa letters."""
    family, code = fmt.split("_")[:2]
    return f"{family} {code.upper().removesuffix('FN')[:4]}"


# The glossary's anchor on the page (its elem_id).
ANCHOR = "glossary"
LINK = f"[glossary](#{ANCHOR})"
TERMS = {
    "the exercise": "the reference exercise this playground is built from: one SGD step of a "
    "single linear layer in mixed precision with a fixed loss scale and no overflow check. The "
    "precision preset `exercise` computes exactly that step.",
    "compute dtype": "the format the forward and backward pass compute in (bfloat16, float16, "
    "float8, or a block-scaled recipe); the parameters stay float32.",
    "mixed step, float32 twin": "the step with its rounded copies and loss scale, and the very "
    "same step (same weights, same data) computed in float32 throughout.",
    "float32 masters": "the float32 parameters (master weights). Each step computes on rounded "
    "copies of them and adds its update to the float32 values, so small updates are kept.",
    "loss scale (S)": "a number the loss is multiplied by before differentiating, so that small "
    "gradients stay representable; the gradients are divided by S before the update.",
    "range, precision": "range: how large and how small a number the format can hold; "
    "precision: how many significant bits it keeps.",
    "binade": "the numbers from one power of two up to the next, [2^k, 2^(k+1)); the magnitude "
    "chart has one bar per binade.",
    "subnormal": "a number below the format's smallest normal one: it keeps fewer significant "
    "bits, down to the smallest subnormal.",
    "flushed": "set to zero: a value at most half the smallest subnormal rounds to 0. 'Flushed "
    "here' marks what this machine's processor (XLA on CPU) also sets to zero: float32 and "
    "bfloat16 subnormal results.",
    "overflow, inf, NaN": "a value past the format's largest number becomes inf (or NaN, for a "
    "format without inf); an update with one in it is not finite.",
    "rounded away": "an update that left the stored weight unchanged: p + update == p, because "
    "the update is under half the spacing between numbers near p.",
    "pure run": "a training run whose parameters are stored in the low-precision format itself, "
    "with no float32 masters.",
    "stochastic rounding, Kahan summation": "two remedies for a pure run: round up or down at "
    "random in proportion to the remainder, or keep each rounding error in a second buffer and "
    "add it back.",
    "amax": "the largest magnitude in a tensor. float8 scales a tensor by its own amax "
    "(current scaling) or by the largest of the last steps' amaxes (delayed scaling).",
    "E4M3, E5M2, E2M1": "small formats named by their exponent and mantissa bits: "
    + ", ".join(f"{_name(fmt)} (largest {dtype_facts(fmt).max:g})" for fmt in SMALL_FORMATS)
    + ".",
    "block scaling": "one scale per block of consecutive values ("
    + ", ".join(f"{name.upper()}: {recipe(name).block.block}" for name in listed_recipes())
    + ") instead of one per tensor, so an outlier spoils only its own block.",
}
GLOSSARY = "## Glossary\n" + "\n".join(f"- **{term}**: {text}" for term, text in TERMS.items())
GLOSSARY += f"\n\n{PYTORCH_LINE}"
