"""The training lessons: the loss-scaling story over many steps (see ``claim``'s rule).

One batch carries the float16 story: 4096 rows, 8 inputs, 16 outputs, inputs of size 1 and
targets of size 2^-16, lr 2. float32 fits it in a few dozen steps down to the noise floor. As
the fit closes in, the residuals and with them the gradients shrink: each entry of the loss's
gradient is 2 x residual / (N x D_out), and once that is below half of float16's smallest
subnormal it rounds to zero. So the float16 run at S = 1 trains at first and then stalls far
above float32; S = 2^15 keeps the gradients representable to the end; dynamic scaling from
PyTorch's default 2^16 (which float16 cannot hold) skips the overflowing steps and settles at
2^15; bfloat16 needs no scale at all (float32's exponent range).

The pure-run lessons store the parameters in bfloat16 with a small lr, so most updates are
under half of bfloat16's spacing at the weights: round-to-nearest loses them and stalls,
stochastic rounding and Kahan summation keep them (on average, or in a buffer) and follow
float32. The float8 lesson is the delayed-scaling spike: each doubling of a dynamic S makes the
gradient's amax jump past its one-step history, that step clips, and the next step fits again.
"""

from __future__ import annotations

import numpy as np

from playground.core.formats.dtypes import dtype_facts
from playground.core.lessons.claim import Claim, DynamicsLesson, checked
from playground.core.lessons.loss_figures import (
    final_loss,
    loss_path,
    loss_ratio,
    stopped,
    update_share,
)
from playground.core.runs.train import DynamicsReport

FLOAT16_STORY = {
    "n": 4096,
    "d_in": 8,
    "d_out": 16,
    "lr": 2.0,
    "target_scale": 2.0**-16,
    "steps": 150,
    "period": 50,
}
PURE_STORY = {"n": 4096, "d_in": 8, "d_out": 16, "lr": 0.005, "steps": 800, "mode": "none"}
FLOAT8_STORY = dict(
    n=32,
    d_in=8,
    d_out=4,
    compute_dtype="float8",
    fp8_scaling="delayed",
    amax_history=1,
    mode="dynamic",
    period=5,
    steps=16,
)
# PyTorch's torch.amp.GradScaler starts at this scale (its init_scale).
GRAD_SCALER_INIT = 2.0**16


def _ratio(dynamics: DynamicsReport, run: str) -> float:  # final loss over float32's
    return float(getattr(dynamics, f"{run}_loss")[-1] / dynamics.float32_loss[-1])


def _said(dynamics: DynamicsReport, run: str) -> str:
    return loss_ratio(getattr(dynamics, f"{run}_loss"), dynamics.float32_loss)


def _float32_trains(dynamics: DynamicsReport, factor: float) -> tuple[str, bool]:
    first, last = float(dynamics.float32_loss[0]), float(dynamics.float32_loss[-1])
    return (
        f"float32 {loss_path(dynamics.float32_loss)}, at most {factor:g} x its start",
        last <= factor * first,
    )


def _like_float32(dynamics: DynamicsReport, run: str, within: float) -> tuple[str, bool]:
    ratio = _ratio(dynamics, run)
    return (
        f"{run} final / float32 final = {_said(dynamics, run)}, within {within:.0%} of 1",
        bool(abs(ratio - 1) <= within),
    )


def chart_steps(indices: np.ndarray) -> list[int]:
    """Steps as the charts' x axis counts them, from their indices in a run's per-step arrays:
    the update of index k is step k + 1, the loss after it is the loss at step k + 1 (0 is
    before training)."""
    return (np.asarray(indices) + 1).tolist()


def _late(shares: np.ndarray) -> float:
    """Mean share over the second half of the run."""
    return float(shares[len(shares) // 2 :].mean())


def _stall_step(curve: np.ndarray) -> int:
    """The first step from which the loss stays within 10% of its final value (noise), to 10."""
    above = np.flatnonzero(curve > 1.1 * curve[-1])
    return round(int(above[-1] + 1) if above.size else 0, -1)


def _float16_unscaled(dynamics: DynamicsReport) -> Claim:
    mixed, float32 = dynamics.mixed_loss, dynamics.float32_loss
    flushed, lost = _late(dynamics.mixed_flushed_share), _late(dynamics.mixed_lost_share)
    ratio, said = _ratio(dynamics, "mixed"), loss_ratio(mixed, float32)
    half = dtype_facts(dynamics.config.compute_dtype).smallest_subnormal / 2
    at_floor = stopped(float32), stopped(mixed)
    sentence = (
        f"float32 goes {loss_path(float32)} and stays there, at its noise floor; the float16 "
        "run at S = 1 follows it while the residuals are large, then stalls: from about step "
        f"{_stall_step(mixed)} on its loss stays at {final_loss(mixed)}, "
        f"{said} float32's. Its gradients have shrunk below half of "
        f"float16's smallest subnormal ({half:.3g}) and round to zero: over the second half of "
        f"the run {flushed:.0%} of its parameter updates per step were zero because their "
        f"gradient flushed, and {lost:.1%} were rounded away when added to the float32 masters."
    )
    return checked(
        sentence,
        [
            _float32_trains(dynamics, 1e-3),
            (f"losses stopped moving (float32, mixed): {at_floor}", all(at_floor)),
            (f"mixed final / float32 final = {said}, at least 100", ratio >= 100),
            (f"late flushed share {flushed:.2f} >= 0.5", flushed >= 0.5),
            (f"late rounded-away share {lost:.3f} <= 0.01", lost <= 0.01),
        ],
        short=(
            "The float16 run at S = 1 follows float32 while its gradients are large, then "
            "stalls: once they shrink below float16's smallest subnormal they round to zero, and "
            "most updates are zero."
        ),
        figures={"ratio": said, "stall_step": _stall_step(mixed), "flushed_share": flushed},
    )


def _float16_scaled(dynamics: DynamicsReport) -> Claim:
    flushed = float(dynamics.mixed_flushed_share.mean())
    share = update_share(flushed, dynamics.mixed_loss)
    scale = float(dynamics.mixed_scale[0])
    sentence = (
        f"With the loss multiplied by S = {scale:g} the same float16 run keeps its gradients "
        f"representable to the end ({share} of the updates per step flushed) and trains "
        f"like float32: {loss_path(dynamics.mixed_loss)} against float32's "
        f"{loss_path(dynamics.float32_loss)} ({_said(dynamics, 'mixed')})."
    )
    return checked(
        sentence,
        [
            _float32_trains(dynamics, 1e-3),
            _like_float32(dynamics, "mixed", 0.1),
            (f"mean flushed share {share} <= 1%", flushed <= 0.01),
        ],
        short=(
            "With the loss scaled by S = 2^15 the same float16 run keeps its gradients to the "
            "end and trains like float32, where the run at S = 1 stalls."
        ),
        figures={"ratio": _said(dynamics, "mixed"), "flushed_share": share},
    )


def _float16_dynamic(dynamics: DynamicsReport) -> Claim:
    largest = dtype_facts(dynamics.config.compute_dtype).max
    skipped = np.flatnonzero(dynamics.mixed_skipped)
    scales = dynamics.mixed_scale
    skipped_scales = sorted({float(s) for s in scales[skipped]})
    said = chart_steps(skipped)
    final_scale = float(scales[-1])
    sentence = (
        f"Dynamic scaling starts at S = {scales[0]:g}, PyTorch GradScaler's default, which "
        f"float16 (largest {largest:g}) cannot hold: that step overflows, is skipped, and S "
        f"halves. After every {dynamics.period} finite steps S doubles, overflows once more "
        f"and comes back: it skipped steps {', '.join(map(str, said))} (all at S = "
        f"{', '.join(f'{s:g}' for s in skipped_scales)}) and ended at S = {final_scale:g}, "
        f"training like float32: {loss_path(dynamics.mixed_loss)} against "
        f"{loss_path(dynamics.float32_loss)}."
    )
    return checked(
        sentence,
        [
            _float32_trains(dynamics, 1e-3),
            (f"skipped steps {said}, at least one", skipped.size > 0),
            (
                f"every skip at a scale above {largest:g} ({skipped_scales})",
                all(s > largest for s in skipped_scales),
            ),
            (f"final S {final_scale:g} <= {largest:g}", final_scale <= largest),
            _like_float32(dynamics, "mixed", 0.1),
        ],
        short=(
            "GradScaler starts at S = 2^16, which float16 cannot hold: it skips each step whose "
            "gradients overflow and halves S, doubles S after a run of finite steps, and so "
            "settles where float16 holds it, training like float32."
        ),
        figures={
            "largest": largest,
            "skipped_steps": said,
            "skipped_scales": [float(s) for s in scales[skipped]],
            "final_scale": final_scale,
            "ratio": _said(dynamics, "mixed"),
        },
    )


def _bfloat16_unscaled(dynamics: DynamicsReport) -> Claim:
    facts = dtype_facts(dynamics.config.compute_dtype)
    flushed = float(dynamics.mixed_flushed_share.mean())
    share = update_share(flushed, dynamics.mixed_loss)
    sentence = (
        f"bfloat16 has float32's exponent range (smallest normal {facts.smallest_normal:.3g}), "
        f"so the same batch at S = 1 loses no gradient to zero ({share} of the updates "
        f"per step flushed) and the mixed run trains like float32: "
        f"{loss_path(dynamics.mixed_loss)} against {loss_path(dynamics.float32_loss)}. No "
        "scale needed."
    )
    return checked(
        sentence,
        [
            _float32_trains(dynamics, 1e-3),
            _like_float32(dynamics, "mixed", 0.1),
            (f"mean flushed share {share} <= 0.1%", flushed <= 0.001),
        ],
        short=(
            "bfloat16 has float32's exponent range, so at S = 1 almost none of its gradients "
            "flush to zero: it trains like float32 where float16 at S = 1 stalls. torch.autocast "
            "in bfloat16 needs no GradScaler."
        ),
        figures={"ratio": _said(dynamics, "mixed"), "flushed_share": share},
    )


def _pure_nearest(dynamics: DynamicsReport) -> Claim:
    pure = dynamics.pure_loss
    lost = float(dynamics.pure_lost_share.mean())
    kept = float(pure[-1] / pure[0])
    sentence = (
        f"lr x gradient is mostly under half of bfloat16's spacing at the weights: "
        f"{lost:.0%} of the pure run's updates per step were rounded away, and its loss went "
        f"only {loss_path(pure)} ({kept:.0%} of its start) while float32, and the mixed run with "
        f"its float32 masters, went {loss_path(dynamics.float32_loss)}."
    )
    return checked(
        sentence,
        [
            _float32_trains(dynamics, 0.5),
            _like_float32(dynamics, "mixed", 0.01),
            (f"pure final / pure start = {kept:.3f} >= 0.9", kept >= 0.9),
            (f"pure rounded-away share {lost:.3f} >= 0.5", lost >= 0.5),
        ],
        short=(
            "A pure run stores the weights in bfloat16 itself, with no float32 master copy. Most "
            "updates are under half the spacing between bfloat16 numbers near the weight, so they "
            "round away and the loss barely moves."
        ),
        figures={
            "lost_share": lost,
            "kept": kept,
            "float32_kept": float(dynamics.float32_loss[-1] / dynamics.float32_loss[0]),
        },
    )


def _pure_remedy(dynamics: DynamicsReport) -> Claim:
    lost = float(dynamics.pure_lost_share.mean())
    how = {
        "stochastic": (
            f"rounds p + update up or down at random, in proportion to the remainder: "
            f"{lost:.0%} of the updates per step still left p unchanged, but on average every "
            "update is kept"
        ),
        "kahan": (
            f"keeps each rounding error in a bfloat16 compensation buffer and adds it back: "
            f"only {lost:.1%} of the updates per step moved neither p nor the buffer"
        ),
    }[dynamics.pure_rounding]
    sentence = (
        f"Same run, {dynamics.pure_rounding} rounding of the pure bfloat16 parameters: it {how}. "
        f"The pure run goes {loss_path(dynamics.pure_loss)}, {_said(dynamics, 'pure')} "
        f"float32's final loss ({loss_path(dynamics.float32_loss)})."
    )
    short = {
        "stochastic": (
            "Stochastic rounding rounds each updated weight up or down at random, in proportion "
            "to the remainder: on average no update is lost, and pure bfloat16 trains like "
            "float32 where round-to-nearest stalls."
        ),
        "kahan": (
            "Kahan summation keeps each weight's rounding error in a second bfloat16 buffer and "
            "adds it back at the next step, so small updates add up and pure bfloat16 trains "
            "like float32 where round-to-nearest stalls."
        ),
    }[dynamics.pure_rounding]
    return checked(
        sentence,
        [_float32_trains(dynamics, 0.5), _like_float32(dynamics, "pure", 0.05)],
        short=short,
        figures={"lost_share": lost, "ratio": _said(dynamics, "pure")},
    )


def _float8_spike(dynamics: DynamicsReport) -> Claim:
    shares = dynamics.mixed_saturated_share
    saturated = np.flatnonzero(shares)
    grew = np.flatnonzero(np.diff(dynamics.mixed_scale) > 0) + 1
    back_to_back = np.intersect1d(saturated, saturated + 1)
    pure, masters = dynamics.pure_lost_share, dynamics.mixed_lost_share
    masters_lost = f"at most {masters.max():.1%}" if masters.any() else "none"
    sentence = (
        f"Dynamic scaling doubles S after every {dynamics.period} finite steps, and delayed "
        "scaling takes each tensor's float8 scale from the amax of the step before: at each "
        f"doubling the gradient's amax jumps past that history, so steps "
        f"{', '.join(map(str, chart_steps(saturated)))} clipped (saturated) up to "
        f"{shares.max():.2%} of their quantized entries to the format's largest value. The step "
        "after each had the new amax in its history and clipped nothing. The mixed run still "
        f"trains like float32: {loss_path(dynamics.mixed_loss)} against "
        f"{loss_path(dynamics.float32_loss)}. The meter's pure float8 line is the same run with "
        f"its parameters stored in float8 itself: {pure.min():.0%} to {pure.max():.0%} of its "
        f"updates per step were rounded away, against {masters_lost} with the float32 masters."
    )
    return checked(
        sentence,
        [
            _float32_trains(dynamics, 0.5),
            (
                f"saturated steps {chart_steps(saturated)}, at least one",
                saturated.size > 0,
            ),
            (
                f"every saturated step is one where S grew ({chart_steps(grew)})",
                bool(np.isin(saturated, grew).all()),
            ),
            (
                f"no two saturated steps in a row ({chart_steps(back_to_back)})",
                back_to_back.size == 0,
            ),
            (
                f"skipped steps {int(dynamics.mixed_skipped.sum())} == 0",
                not dynamics.mixed_skipped.any(),
            ),
            _like_float32(dynamics, "mixed", 0.1),
        ],
        short=(
            "Delayed scaling takes each float8 scale from the previous step's amax. Each time the "
            "loss scale doubles, the gradients jump past that history and that one step clips; "
            "the next fits again, and training follows float32."
        ),
        figures={
            "saturated_steps": chart_steps(saturated),
            "saturated_shares": shares[saturated].tolist(),
            "ratio": _said(dynamics, "mixed"),
        },
    )


FLOAT16 = FLOAT16_STORY | {"compute_dtype": "float16"}
PURE = PURE_STORY | {"compute_dtype": "bfloat16"}
DYNAMICS_LESSONS = (
    DynamicsLesson(
        "train-float16-unscaled",
        "float16, S = 1: training stalls as gradients flush",
        FLOAT16 | {"mode": "static", "loss_scale": 1.0},
        _float16_unscaled,
    ),
    DynamicsLesson(
        "train-float16-scaled",
        "float16, S = 2^15: trains like float32",
        FLOAT16 | {"mode": "static", "loss_scale": 2.0**15},
        _float16_scaled,
    ),
    DynamicsLesson(
        "train-float16-dynamic",
        "float16, dynamic scaling finds its scale",
        FLOAT16 | {"mode": "dynamic", "loss_scale": GRAD_SCALER_INIT},
        _float16_dynamic,
    ),
    DynamicsLesson(
        "train-bfloat16-unscaled",
        "bfloat16, S = 1: no scale needed",
        FLOAT16_STORY | {"compute_dtype": "bfloat16", "mode": "static", "loss_scale": 1.0},
        _bfloat16_unscaled,
    ),
    DynamicsLesson(
        "train-pure-nearest",
        "pure bfloat16, round-to-nearest: updates rounded away",
        PURE | {"pure_rounding": "nearest"},
        _pure_nearest,
    ),
    DynamicsLesson(
        "train-pure-stochastic",
        "pure bfloat16, stochastic rounding recovers",
        PURE | {"pure_rounding": "stochastic"},
        _pure_remedy,
    ),
    DynamicsLesson(
        "train-pure-kahan",
        "pure bfloat16, Kahan summation recovers",
        PURE | {"pure_rounding": "kahan"},
        _pure_remedy,
    ),
    DynamicsLesson(
        "train-float8-delayed",
        "float8, delayed scaling clips after a jump",
        FLOAT8_STORY,
        _float8_spike,
    ),
)
