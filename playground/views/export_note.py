"""What differs in PyTorch: the export's "PyTorch" note for the current settings.

Rule: ``pytorch_note(config, page_loss, autocast_loss)`` is Markdown computed from the settings,
the dtype registry and two losses the caller computed (no torch: the app does not depend on
it). It says how the page's words map to the exported PyTorch script and where PyTorch rounds
or scales differently:

    measured       given the page's mixed loss after the step and ``core.export.autocast``'s
                   estimate of PyTorch's (the same step rounded as autocast rounds), their
                   relative difference, and how near PyTorch comes to the estimate
                   (``estimate_bound``: half the dtype's eps)
    agreement      autocast rounds where PyTorch's op lists say (each nn.Linear in the compute
                   dtype, mse_loss in float32), the exercise where it casts (data, weights, the
                   loss itself), so the losses agree within the compute dtype's precision:
                   within its eps (relative) for a step, FLOAT32_AGREEMENT for float32 losses
                   (both checked by tests/views/test_export_torch.py), never bit for bit
    loss scaling   by ``mode``: none (GradScaler disabled, as the page), static (GradScaler
                   skips a step with inf or NaN gradients even at a fixed scale; the page's
                   fixed scale applies it), dynamic (the same doubling and halving, but
                   GradScaler has no floor and no cap; the page's never goes below
                   min(1, its start), as jmp's)
    range          a scale above the compute dtype's largest value overflows the page's first
                   backward operation (its loss is in that dtype) but not PyTorch's, whose
                   mse_loss is float32
    not exported   the pure run; a recipe that is not a plain cast (float8) at all
"""

from __future__ import annotations

import math

from playground.core.formats.dtypes import dtype_facts
from playground.core.recipes.registry import recipe
from playground.core.settings.settings import LOSS_SCALE_MAX, StepConfig

# The relative agreement of the PyTorch script's float32 losses with the page's (the step's and
# a short run's): two float32 programs summing in different orders.
FLOAT32_AGREEMENT = 1e-5
TITLE = "**PyTorch**"


def _number(value: float) -> str:
    """Up to 6 significant digits, ``1e-5`` rather than ``1e-05``."""
    return f"{value:.6g}".replace("e-0", "e-").replace("e+0", "e+")


def _power(value: float) -> str:
    """``2^k`` for a power of two, else the number."""
    mantissa, exponent = math.frexp(value)
    return f"2^{exponent - 1}" if mantissa == 0.5 else _number(value)


def agreement_bound(compute_dtype: str) -> float:
    """The relative difference within which a step's mixed loss agrees: the dtype's eps."""
    return dtype_facts(compute_dtype).eps


def estimate_bound(compute_dtype: str) -> float:
    """How close PyTorch's own step loss comes to ``core.export.autocast``'s estimate of it:
    half the dtype's eps (checked by tests/views/test_export_torch.py and
    test_export_transformer.py)."""
    return dtype_facts(compute_dtype).eps / 2


def pytorch_note(
    config: StepConfig, page_loss: float | None = None, autocast_loss: float | None = None
) -> str:
    """The note for ``config`` (see the module rule); given the page's mixed loss after the step
    and ``core.export.autocast``'s estimate of PyTorch's, the "measured" line too."""
    dtype = config.compute_dtype
    if recipe(dtype).plain_dtype != dtype:
        return (
            f"{TITLE}: not exported for {dtype}. PyTorch's autocast on CPU computes in "
            "bfloat16 or float16 only, and the exported scripts compute in those."
        )
    facts, scale = dtype_facts(dtype), config.loss_scale
    eps = agreement_bound(dtype)
    usage = (
        f'{TITLE}: `torch.autocast(device_type="cpu", dtype=torch.{dtype})`, '
        f"`torch.amp.GradScaler`, `torch.optim` for {config.optimizer}; the float32 masters "
        "are the model's own parameters."
    )
    rounding = (
        f"- **Not bit for bit.** autocast rounds where PyTorch's op lists say (`nn.Linear` in "
        f"{dtype}, `mse_loss` in float32), the exercise where it casts (data, weights, loss); "
        f"a step's losses agree within {dtype}'s eps ({_power(eps)}) relative, float32 losses "
        f"within {_number(FLOAT32_AGREEMENT)}, and over a run the differences add up."
    )
    lines = [usage, rounding]
    if page_loss is not None and not math.isfinite(page_loss):
        lines.append(
            f"- **This step**: the page's loss after it is {page_loss}: its scaled gradients "
            "overflowed, and GradScaler would have skipped the step."
        )
    elif page_loss is not None and autocast_loss is not None:
        apart = abs(autocast_loss - page_loss) / abs(page_loss) if page_loss else math.inf
        lines.append(
            f"- **This step, as autocast rounds it** (computed here in JAX): loss "
            f"{_number(autocast_loss)} after the step, the page's {_number(page_loss)}: "
            f"{_number(apart)} apart (relative). PyTorch's own lies within "
            f"{_number(estimate_bound(dtype))} of this estimate."
        )
    if config.mode == "none":
        lines.append("- **No loss scale**: `GradScaler(enabled=False)`, S = 1, as here.")
    elif config.mode == "static":
        lines.append(
            f"- **Fixed scale** S = {_power(scale)}: `GradScaler(init_scale=S)`, put back by "
            "`update(new_scale=S)` each step. GradScaler skips a step with inf or NaN "
            "gradients even so; the page's fixed scale (the exercise) applies it."
        )
    else:
        floor = min(1.0, scale)
        lines.append(
            f"- **Dynamic scale** from S = {_power(scale)}: `GradScaler(init_scale=S, "
            f"growth_interval={config.period})` doubles after {config.period} finite steps and "
            "halves and skips on inf or NaN, as here. GradScaler has no floor and no cap; "
            f"the page's scale never goes below {_power(floor)} (jmp's rule), so they part "
            "only if S falls that far."
        )
    # A dynamic scale may grow to the largest a scale can start at; bfloat16 holds all of them.
    if scale > facts.max or (config.mode == "dynamic" and facts.max < LOSS_SCALE_MAX):
        lines.append(
            f"- **{dtype}'s range**: a scale above {_number(facts.max)} overflows the "
            f"page's first backward operation (its loss is {dtype}); PyTorch's `mse_loss` is "
            "float32, so its gradients can stay finite there."
            + (f" Your S = {_power(scale)} is above it." if scale > facts.max else "")
        )
    lines.append(
        "- **Not in the PyTorch script**: the pure run (weights stored in "
        f"{dtype}, `pure_rounding`); autocast keeps weights in float32."
    )
    return "\n".join(lines)
