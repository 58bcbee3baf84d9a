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
                   loss itself; the autocast policy where autocast does), so the losses agree
                   within the compute dtype's precision: within its eps (relative) for a step,
                   FLOAT32_AGREEMENT for float32 losses (both checked by
                   tests/views/test_export_torch.py), never bit for bit; float8's scaled casts
                   round as the page's, its float32 sums in another order (FLOAT8_AGREEMENT)
    loss scaling   float16 (``uses_grad_scaler``: an exponent narrower than float32's) by
                   ``mode``: none (GradScaler disabled, as the page), static (GradScaler skips
                   a step with inf or NaN gradients even at a fixed scale; the page's fixed
                   scale applies it), dynamic (the same doubling and halving, but GradScaler
                   has no floor and no cap; the page's never goes below min(1, its start), as
                   jmp's); bfloat16 and float8: no GradScaler, the page's rule written out
    range          a scale above the compute dtype's largest value overflows the page's first
                   backward operation (its loss in that dtype, the exercise) but not PyTorch's,
                   whose mse_loss is float32
    not exported   the pure run; a block-scaled recipe at all
"""

from __future__ import annotations

import math

from playground.core.formats.dtypes import dtype_facts
from playground.core.model.op_policy import preset
from playground.core.recipes.registry import recipe
from playground.core.settings.settings import LOSS_SCALE_MAX, StepConfig

# The relative agreement of the PyTorch script's float32 losses with the page's (the step's and
# a short run's): two float32 programs summing in different orders.
FLOAT32_AGREEMENT = 1e-5
# The float8 script's losses against the page's (a step's and a run's): the same scaled casts,
# their float32 products summed in another order (measured: 1e-7 for a step, 5e-5 after 200).
FLOAT8_AGREEMENT = 1e-3
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


def uses_grad_scaler(compute_dtype: str) -> bool:
    """Whether the PyTorch script scales the loss with torch.amp.GradScaler: where the pass
    computes in a dtype whose exponent range is narrower than float32's (float16). bfloat16 has
    float32's, and PyTorch users train it without a scaler; float8 computes in float32 between
    its scaled casts. There the script applies the page's S itself."""
    pass_dtype = recipe(compute_dtype).cast_dtype
    return dtype_facts(pass_dtype).exponent_bits < dtype_facts("float32").exponent_bits


def pytorch_note(
    config: StepConfig, page_loss: float | None = None, autocast_loss: float | None = None
) -> str:
    """The note for ``config`` (see the module rule); given the page's mixed loss after the step
    and ``core.export.autocast``'s estimate of PyTorch's, the "measured" line too."""
    dtype, entry = config.compute_dtype, recipe(config.compute_dtype)
    if entry.plain_dtype != dtype and not entry.scalings:
        return (
            f"{TITLE}: not exported for {dtype}: its per-block scales (and any Hadamard "
            "rotation or stochastic rounding) are not in the PyTorch script, which computes "
            "in a plain dtype under `torch.autocast` or in float8 with per-tensor scales."
        )
    if entry.plain_dtype != dtype:
        return "\n".join([*_float8_lines(config), *_scaling_lines(config), _pure_line(dtype)])
    eps = agreement_bound(dtype)
    low_loss = preset(config.precision_policy).dtype("loss", dtype) == dtype
    usage = (
        f'{TITLE}: `torch.autocast(device_type="cpu", dtype=torch.{dtype})`, '
        f"{'`torch.amp.GradScaler`' if uses_grad_scaler(dtype) else 'no GradScaler'}, "
        f"`torch.optim` for {config.optimizer}; the float32 masters are the model's own "
        "parameters."
    )
    where = (
        "your precision policy, autocast, rounds there too; they part in how a layer rounds "
        "and in summation order"
        if not low_loss
        else "the exercise where it casts (data, weights, loss)"
    )
    rounding = (
        f"- **Not bit for bit.** autocast rounds where PyTorch's op lists say (`nn.Linear` in "
        f"{dtype}, `mse_loss` in float32), {where}; a step's losses agree within {dtype}'s "
        f"eps ({_power(eps)}) relative, float32 losses within {_number(FLOAT32_AGREEMENT)}, "
        "and over a run the differences add up."
    )
    lines = [usage, rounding]
    if page_loss is not None and not math.isfinite(page_loss):
        skipped = "GradScaler would have skipped the step" if uses_grad_scaler(dtype) else ""
        lines.append(
            f"- **This step**: the page's loss after it is {page_loss}: its scaled gradients "
            f"overflowed{', and ' + skipped if skipped else ''}."
        )
    elif page_loss is not None and autocast_loss is not None:
        apart = abs(autocast_loss - page_loss) / abs(page_loss) if page_loss else math.inf
        lines.append(
            f"- **This step, as autocast rounds it** (computed here in JAX): loss "
            f"{_number(autocast_loss)} after the step, the page's {_number(page_loss)}: "
            f"{_number(apart)} apart (relative). PyTorch's own lies within "
            f"{_number(estimate_bound(dtype))} of this estimate."
        )
    lines += _scaling_lines(config)
    facts, scale = dtype_facts(dtype), config.loss_scale
    # A dynamic scale may grow to the largest a scale can start at; bfloat16 holds all of them.
    if low_loss and (
        scale > facts.max or (config.mode == "dynamic" and facts.max < LOSS_SCALE_MAX)
    ):
        lines.append(
            f"- **{dtype}'s range**: a scale above {_number(facts.max)} overflows the "
            f"page's first backward operation (its loss is {dtype}); PyTorch's `mse_loss` is "
            "float32, so its gradients can stay finite there."
            + (f" Your S = {_power(scale)} is above it." if scale > facts.max else "")
        )
    lines.append(_pure_line(dtype))
    return "\n".join(lines)


def _float8_lines(config: StepConfig) -> list[str]:
    """The note's lines for a per-tensor float8 recipe: the scaled casts and their agreement."""
    entry = recipe(config.compute_dtype)
    scales = {
        "none": "scale 1",
        "current": "the scale fmax / amax of the tensor now",
        "delayed": (
            f"the scale fmax / the largest amax of the last {config.amax_history} steps "
            "(1 at the first)"
        ),
    }
    return [
        (
            f"{TITLE}: each `nn.Linear` is a `Float8Linear`, whose matmul (a "
            "`torch.autograd.Function`) casts its input and weight to "
            f"`torch.{entry.forward_format}` and the gradient arriving at it to "
            f"`torch.{entry.gradient_format}`, saturating, each times "
            f'{scales[config.fp8_scaling]} (`FP8_SCALING = "{config.fp8_scaling}"`), as here; '
            f"no autocast, `torch.optim` for {config.optimizer}."
        ),
        (
            "- **Not bit for bit.** PyTorch on CPU has no float8 matmul: the script multiplies the "
            "rounded values in float32, which rounds as the page's float8 matmul does but sums in "
            f"another order; the losses agree within {_number(FLOAT8_AGREEMENT)} relative, "
            f"float32 losses within {_number(FLOAT32_AGREEMENT)}."
        ),
    ]


def _scaling_lines(config: StepConfig) -> list[str]:
    """How the script applies the loss scale S of ``mode``: GradScaler (float16), or the page's
    own rule written out (``LossScale``)."""
    scale, period = config.loss_scale, config.period
    if not uses_grad_scaler(config.compute_dtype):
        if config.mode == "none":
            return ["- **No loss scale**: S = 1, as here."]
        if config.mode == "static":
            return [
                (
                    f"- **Fixed scale** S = {_power(scale)}, no GradScaler: `loss * S` before "
                    "`backward()`, the gradients divided by S after, every step applied, as here."
                )
            ]
        return [
            (
                f"- **Dynamic scale** from S = {_power(scale)}, no GradScaler: the page's rule "
                f"written out (`LossScale`): doubled after {period} finite steps, halved and the "
                f"step skipped on inf or NaN, never below {_power(min(1.0, scale))}, as here."
            )
        ]
    if config.mode == "none":
        return ["- **No loss scale**: `GradScaler(enabled=False)`, S = 1, as here."]
    if config.mode == "static":
        return [
            (
                f"- **Fixed scale** S = {_power(scale)}: `GradScaler(init_scale=S)`, put back by "
                "`update(new_scale=S)` each step. GradScaler skips a step with inf or NaN "
                "gradients even so; the page's fixed scale (the exercise) applies it."
            )
        ]
    return [
        (
            f"- **Dynamic scale** from S = {_power(scale)}: `GradScaler(init_scale=S, "
            f"growth_interval={period})` doubles after {period} finite steps and "
            "halves and skips on inf or NaN, as here. GradScaler has no floor and no cap; "
            f"the page's scale never goes below {_power(min(1.0, scale))} (jmp's rule), so they "
            "part only if S falls that far."
        )
    ]


def _pure_line(compute_dtype: str) -> str:
    stored = recipe(compute_dtype).forward_format  # what the page's pure run stores
    return (
        "- **Not in the PyTorch script**: the pure run (weights stored in "
        f"{stored}, `pure_rounding`); the script keeps weights in float32."
    )
