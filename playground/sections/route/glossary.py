"""The page's glossary: every term of art the page uses, in a sentence or two, linked from the
page's first words (``LINK``) and from the route's chapters.

Rule: ``linked(text)`` links the first appearance of each term of ``MENTIONS`` in ``text`` to
the glossary, its definition as the link's title (the browser shows it on hover), and sets
torch's name beside ours where PyTorch has one (kernel (torch: weight); not where the text
already writes torch's qualified name, torch.autocast); a term already inside a link or code is
left as it is.
"""

from __future__ import annotations

import re

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
    "kernel": "a dense layer's weight matrix (flax's name for what torch calls `weight`).",
    "autocast": "the precision preset in which each operation computes in the dtype torch's "
    "`torch.autocast` gives it: matmuls low, reductions, norms and the loss in float32.",
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
    "dynamic loss scaling": "the loss scale adjusted while training, as "
    "`torch.amp.GradScaler` does: halved (and the step skipped) when a gradient overflows, "
    "doubled after a run of good steps.",
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

# The words that name a glossary term in the route's text (a regular expression each, matched
# case-sensitively at word boundaries), the term, and torch's name for it where it has one.
MENTIONS = (
    (r"kernel(?:'s)?", "kernel", "weight"),
    (r"loss scale(?: S)?", "loss scale (S)", "GradScaler's scale"),
    (r"autocast", "autocast", "torch.autocast"),
    (r"exercise", "the exercise", None),
    (r"float32 (?:masters|master weights)", "float32 masters", "your model's own parameters"),
    (r"binades?", "binade", None),
    (r"subnormals?", "subnormal", None),
    (r"flush(?:ed|es)?", "flushed", None),
    (r"overflows?|overflowed", "overflow, inf, NaN", None),
    (r"rounded away", "rounded away", None),
    (r"pure (?:run|bfloat16|float16)", "pure run", None),
    (
        r"stochastic(?:ally)? round(?:ing|ed)|rounded stochastically",
        "stochastic rounding, Kahan summation",
        None,
    ),
    (r"Kahan summation", "stochastic rounding, Kahan summation", None),
    (r"dynamic loss scaling|GradScaler", "dynamic loss scaling", None),
    (r"amax|delayed scaling|current scaling", "amax", None),
    (r"E4M3|E5M2|E2M1", "E4M3, E5M2, E2M1", None),
    (
        "block scaling|per block|" + "|".join(name.upper() for name in listed_recipes()),
        "block scaling",
        None,
    ),
)
# A mention is whole words, not part of a dotted name (torch.autocast stays as written).
_MENTION = re.compile(
    r"(?<![\w.])(" + "|".join(f"(?:{words})" for words, _, _ in MENTIONS) + r")\b"
)
# Markdown links and code spans: their text is left as it is.
_KEEP = re.compile(r"\[[^\]]*\]\([^)]*\)|`[^`]*`")


def _title(term: str) -> str:
    """The definition of ``term`` as a Markdown link title (plain, no quotes or backticks)."""
    return TERMS[term].replace('"', "'").replace("`", "")


def linked(text: str, seen: set[str] | None = None) -> str:
    """``text`` with each glossary term linked where it first appears (see the module rule).

    Args:
      text: Markdown.
      seen: the terms already linked earlier in the same view (updated here), so a term links
        once across several texts; None: a set of this text's own.

    Returns:
      The Markdown with the links.
    """
    seen = set() if seen is None else seen

    def link(found: re.Match[str]) -> str:
        words = found.group(0)
        term, torch = next(
            (term, torch) for pattern, term, torch in MENTIONS if re.fullmatch(pattern, words)
        )
        if term in seen:
            return words
        seen.add(term)
        said = torch is not None and "." in torch and torch in text  # torch.autocast, written
        beside = f" (torch: {torch})" if torch and not said else ""
        return f'[{words}](#{ANCHOR} "{_title(term)}"){beside}'

    kept = [span.span() for span in _KEEP.finditer(text)]
    pieces, start = [], 0
    for begin, end in [*kept, (len(text), len(text))]:
        pieces.append(_MENTION.sub(link, text[start:begin]))
        pieces.append(text[begin:end])
        start = end
    return "".join(pieces)
