"""The pictures of the route's chapters on one step's gradients and on training runs (chapters
1-10): each draws the contrast its chapter's claim argues, with the claim's numbers as labels.

Rule: a picture is a function of the chapter, its runs (lesson id -> run: its lesson, payoff and
contrasts, ``core.lessons.route``) and its lesson's claim (whose ``figures`` hold what the claim
computed beyond the runs), returning a Plotly figure dict; nothing is computed here. A number a
picture shows is the run's own or its claim's, written as a label, a legend name or an
annotation; every line it draws is named in its legend. A picture drawn for a claim that does
not hold still draws its runs (the view gives the condition instead of the claim), and labels
only what its runs hold.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from playground.core.lessons import LESSONS, Claim
from playground.core.lessons.route import Chapter
from playground.core.runs.train import DynamicsReport
from playground.core.step.report import StepReport
from playground.sections.dynamics.charts import loss_ticks, lost_update_figure, scale_figure
from playground.sections.dynamics.summary import ROUNDING_NAMES
from playground.sections.lab.charts import magnitude_histogram
from playground.sections.route.pictures import picture
from playground.sections.step.charts import gradient_scatter
from playground.views.plotly import (
    CHART_BACKGROUND,
    FLOAT32_COLOR,
    MIXED_COLOR,
    OVERFLOW_COLOR,
    TEXT_COLOR,
    Figure,
    base_layout,
    line_trace,
    subsample,
)

Runs = dict[str, StepReport | DynamicsReport]
Picture = Callable[[Chapter, Runs, Claim], Figure]
# The line of the run a chapter argues against (its contrast): red, as the stalled run.
STALLED_COLOR = OVERFLOW_COLOR


def scale_text(scale: float) -> str:
    """A loss scale as the route writes it: ``2^15`` for a power of two, else its value."""
    exponent = math.log2(scale) if scale > 0 and math.isfinite(scale) else 0.5
    return f"2^{exponent:.0f}" if exponent.is_integer() and scale != 1 else f"{scale:g}"


def note(text: str, x: float, y: float, **extra: Any) -> dict[str, Any]:
    """An annotation at (``x``, ``y``) on the plot's own axes, in the page's text colour."""
    return {
        "x": x,
        "y": y,
        "xref": "x",
        "yref": "y",
        "text": text,
        "showarrow": True,
        "arrowhead": 2,
        "ax": 0,
        "ay": -30,
        "font": {"size": 11, "color": TEXT_COLOR},
        # The chart's own paper colour, which the dark theme swaps with the text's.
        "bgcolor": CHART_BACKGROUND,
        **extra,
    }


def corner_note(text: str, right: bool = False, y: float = 0.98) -> dict[str, Any]:
    """An annotation in the plot's top left corner (top right where ``right``; lower where
    ``y``, a share of the plot's height, is smaller), where the picture draws no data."""
    side = "right" if right else "left"
    return {
        "x": 0.98 if right else 0.02,
        "y": y,
        "xref": "paper",
        "yref": "paper",
        "xanchor": side,
        "yanchor": "top",
        "align": side,
        "text": text,
        "showarrow": False,
        "font": {"size": 11, "color": TEXT_COLOR},
        # The chart's own paper colour, which the dark theme swaps with the text's.
        "bgcolor": CHART_BACKGROUND,
    }


def _annotate(figure: Figure, *notes: dict[str, Any]) -> Figure:
    layout = figure["layout"]
    return figure | {"layout": layout | {"annotations": [*layout.get("annotations", []), *notes]}}


def _share(part: int, whole: int) -> str:
    return f"{part:,} of {whole:,} ({part / whole:.0%})" if whole else f"{part:,}"


@picture("agreement")
def agreement(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 1: each gradient entry, bfloat16 against float32, on the diagonal; the kernel
    gradient's relative error and the new losses' difference written on it."""
    report = runs[chapter.lesson]
    figure = gradient_scatter(report)
    for trace in figure["data"]:
        name = trace.get("name", "")
        if name == "y = x":
            trace["name"] = f"y = x ({report.config.compute_dtype} equals float32)"
        elif name.startswith("kernel ("):  # torch's nn.Linear calls it weight
            trace["name"] = name.replace("kernel (", "kernel (torch's weight; ", 1)
    figures = claim.figures
    if "kernel_error" not in figures:
        return figure
    return _annotate(
        figure,
        corner_note(
            f"kernel gradient's relative error (in norm): {figures['kernel_error']:.2e}<br>"
            f"new loss {report.mixed_new_loss:.6g} against float32's "
            f"{report.float32_new_loss:.6g} (relative difference "
            f"{figures['loss_relative']:.1e})"
        ),
    )


def _zeros_note(figure: Figure, text: str, trace: int = 0) -> dict[str, Any]:
    """A note on the magnitude chart's "zeros" bar of the ``trace``-th series."""
    data = figure["data"][trace]
    return note(text, data["x"][0], math.log10(max(data["y"][0], 1)), xanchor="left", ax=50, ay=40)


@picture("flushed")
def flushed(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 2: the gradient magnitudes over float16's ranges, the share flushed to zero
    written on the zeros bar and float32's median magnitude beside half the smallest
    subnormal."""
    report = runs[chapter.lesson]
    figure = magnitude_histogram(report)
    figures = claim.figures
    if "flushed" not in figures:
        return figure
    dtype = report.config.compute_dtype
    return _annotate(
        figure,
        _zeros_note(figure, f"{_share(figures['flushed'], figures['total'])}<br>flushed to 0"),
        corner_note(
            f"float32's median |gradient| {figures['median']:.3g}<br>below half of {dtype}'s "
            f"smallest subnormal, {figures['half_subnormal']:.3g}",
            right=True,
        ),
    )


@picture("rescued")
def rescued(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 3: the same gradients without a scale (the contrast, S = 1) and with S, on one
    float16 axis: the S = 1 gradients pile up at zero, the scaled ones sit in the normal range
    and come back after unscaling."""
    report, before = runs[chapter.lesson], runs[chapter.contrast]
    figure = magnitude_histogram(report)
    scale, unscaled = scale_text(report.config.loss_scale), scale_text(before.config.loss_scale)
    scaled_trace, back = figure["data"]
    scaled_trace["name"] = f"S = {scale}: scaled, as the backward pass holds them"
    back["name"] = f"S = {scale}: after unscaling (÷ S, float32)"
    # The S = 1 gradients as the backward pass holds them, on the same binade axis: its bins
    # are whole binades on both, only the "zeros" and "inf/NaN" slots sit elsewhere.
    other = magnitude_histogram(before)["data"][0]
    x, y = list(other["x"]), list(other["y"])
    x[0], x[-1] = scaled_trace["x"][0], scaled_trace["x"][-1]
    shown = [(a, b) for a, b in zip(x, y, strict=True) if x[0] <= a <= x[-1]]
    stall = {
        "type": "scatter",
        "mode": "lines",
        "x": [a for a, _ in shown],
        "y": [b for _, b in shown],
        "name": f"S = {unscaled}: the gradients without a scale",
        "line": {"shape": "hvh", "color": STALLED_COLOR, "width": 2, "dash": "dot"},
        "hovertemplate": "%{y} entries at 2^%{x:.0f}<extra>S = " + unscaled + "</extra>",
    }
    figure["data"].append(stall)
    figures = claim.figures
    if "flushed" not in figures:
        return figure
    lost = LESSONS[chapter.contrast].claim(before).figures
    notes = [
        corner_note(
            f"S = {scale}: {_share(figures['normal'], figures['total'])} scaled entries normal, "
            f"{figures['subnormal']:,} subnormal,<br>{figures['flushed']:,} flushed to 0 after "
            "unscaling",
            right=True,
        )
    ]
    if "flushed" in lost:
        zero = note(
            f"S = {unscaled}: {_share(lost['flushed'], lost['total'])}<br>flushed to 0",
            stall["x"][0],
            math.log10(max(stall["y"][0], 1)),
            xanchor="left",
            ax=50,
            ay=40,
        )
        notes.append(zero)
    return _annotate(figure, *notes)


@picture("scale_overflow")
def scale_overflow(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 4: S itself against float16's largest value: S = 2^15 is held, S = 2^16 becomes
    inf, so the exercise's float16 loss times S is inf and every gradient inf or NaN."""
    report = runs[chapter.lesson]
    dtype = report.config.compute_dtype
    figures = claim.figures
    title = f"The loss scale S in {dtype} and in float32"
    layout = base_layout(title, "log2 of the value held", "")
    if "held" not in figures:
        return {"data": [], "layout": layout}
    largest = figures["largest"]
    edge = math.log2(largest)
    names, held_x, held_text, colors = [], [], [], []
    reach = edge + 3  # inf is drawn past the largest value, to the axis's end
    for scale, fmt, held in figures["held"]:
        where = "the exercise's loss" if fmt == dtype else "GradScaler's scale"
        names.append(f"S = {scale_text(scale)} in {fmt}<br>({where})")
        held_x.append(math.log2(held) if math.isfinite(held) else reach)
        held_text.append(f"{held:g}" if math.isfinite(held) else f"{held} in {fmt}")
        colors.append(MIXED_COLOR if math.isfinite(held) else STALLED_COLOR)
    data = [
        {
            "type": "bar",
            "orientation": "h",
            "y": names,
            "x": held_x,
            "text": held_text,
            "textposition": "inside",
            "marker": {"color": colors},
            "name": "S as each format holds it (red: not finite)",
            "hovertemplate": "%{y}: %{text}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "x": [edge, edge],
            "y": [names[0], names[-1]],
            "name": f"{dtype}'s largest value, {largest:g}",
            "line": {"color": TEXT_COLOR, "dash": "dash", "width": 2},
            "hoverinfo": "skip",
        },
    ]
    layout["xaxis"].update(range=[edge - 4, reach])
    nan, inf, total = figures["nan"], figures["inf"], figures["total"]
    layout["title"]["text"] = (
        f"{title}<br><sup>at S = {scale_text(report.config.loss_scale)}: {nan + inf:,} of "
        f"{total:,} scaled gradient entries not finite ({nan:,} NaN, {inf:,} inf)</sup>"
    )
    return {"data": data, "layout": layout}


@picture("scale_steps")
def scale_steps(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 5: the loss scale per step, each skipped step marked and annotated with the S it
    overflowed at, under float16's largest value; the final S written at the end."""
    dynamics = runs[chapter.lesson]
    figure = scale_figure(dynamics)
    figure["data"][0]["name"] = "log2 loss scale S (GradScaler's scale)"
    figures = claim.figures
    if "largest" not in figures:
        return figure
    edge = math.log2(figures["largest"])
    figure["data"].append(
        {
            "type": "scatter",
            "mode": "lines",
            "x": [1, dynamics.steps],
            "y": [edge, edge],
            "name": f"float16's largest value, {figures['largest']:g}",
            "line": {"color": TEXT_COLOR, "dash": "dash", "width": 1},
            "hoverinfo": "skip",
        }
    )
    notes = [
        note(
            f"step {step}: skipped at S = {scale_text(scale)}, halved",
            step,
            math.log2(scale),
            ay=-22 - 14 * (index % 2),
        )
        for index, (step, scale) in enumerate(
            zip(figures["skipped_steps"], figures["skipped_scales"], strict=True)
        )
    ]
    final = figures["final_scale"]
    notes.append(
        note(f"ends at S = {scale_text(final)}", dynamics.steps, math.log2(final), ay=30, ax=-40)
    )
    return _annotate(figure, *notes)


def _loss_line(run: DynamicsReport, which: str, name: str, color: str, **extra: Any) -> Figure:
    """One loss curve of ``run`` (``float32``, ``mixed`` or ``pure``) against the steps."""
    curve = getattr(run, f"{which}_loss")
    picked = subsample(curve.size)
    return line_trace(picked.tolist(), curve[picked], name, color, **extra)


def _loss_layout(title: str, lines: list[Figure]) -> dict[str, Any]:
    """A log loss axis ticked over the ``lines``' own losses (``loss_ticks``)."""
    layout = base_layout(title, "step (0 = before training)", "MSE (float32, log scale)")
    losses = np.array([y for line in lines for y in line["y"] if y is not None and y > 0])
    layout["yaxis"].update(type="log", **loss_ticks(losses))
    layout["showlegend"] = True
    return layout


def _run_name(run: DynamicsReport, which: str) -> str:
    """The run as a PyTorch user meets it: its format and loss scale (float32 master weights,
    as torch.autocast keeps them) or, a pure run, its format and rounding."""
    config = run.config
    if which == "pure":
        return f"pure {config.compute_dtype}, {ROUNDING_NAMES[config.pure_rounding]}"
    return f"{config.compute_dtype}, S = {scale_text(config.loss_scale)}"


def _ending(claim: Claim) -> str:
    """Where the run ends, where its claim holds: its final loss against float32's, or (a
    stalled pure run) against its own start."""
    figures = claim.figures
    if not claim.holds:
        return ""
    if "ratio" in figures:
        return f": ends at {figures['ratio']} float32's"
    if "kept" in figures:
        return f": stalls at {figures['kept']:.0%} of its start"
    return ""


@picture("stall_beside")
def stall_beside(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 6 (and a payoff): the run that trains beside the contrast's run that stalls, and
    float32, each line named with its final loss against float32's."""
    return two_runs(chapter.lesson, chapter.contrast, runs, claim, "mixed")


def two_runs(lesson: str, contrast: str | None, runs: Runs, claim: Claim, which: str) -> Figure:
    """The loss curves of ``lesson``'s run and of ``contrast``'s (its stalled run, pinned
    beside, dotted red) and float32's: ``which`` names the curve compared (``mixed`` or
    ``pure``)."""
    run = runs[lesson]
    lines = [_loss_line(run, "float32", "float32", FLOAT32_COLOR)]
    lines.append(_loss_line(run, which, _run_name(run, which) + _ending(claim), MIXED_COLOR))
    if contrast:
        stalled = runs[contrast]
        said = LESSONS[contrast].claim(stalled)
        dash = {"line": {"color": STALLED_COLOR, "width": 2, "dash": "dot"}}
        name = _run_name(stalled, which) + _ending(said)
        lines.append(_loss_line(stalled, which, name, STALLED_COLOR, **dash))
    title = f"Loss over the steps: {_run_name(run, which)}"
    if contrast:
        title += f" beside {_run_name(runs[contrast], which)}"
    return {"data": lines, "layout": _loss_layout(title, lines)}


@picture("lost_updates_pure")
def lost_updates(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 7: the lost-update meter, the pure run's mean share rounded away and how far its
    loss fell written on it."""
    dynamics = runs[chapter.lesson]
    figure = lost_update_figure(dynamics)
    figures = claim.figures
    if "kept" not in figures:
        return figure
    return _annotate(
        figure,
        corner_note(
            f"pure {dynamics.config.compute_dtype}: {figures['lost_share']:.0%} of the updates "
            f"per step rounded away (mean);<br>its loss ends at {figures['kept']:.0%} of its "
            f"start, float32's at {figures['float32_kept']:.0%} of its own",
            y=0.6,
        ),
    )


@picture("remedy_beside")
def remedy_beside(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapters 8-9: the pure run with its remedy beside the round-to-nearest pure run that
    stalls (the contrast), and float32."""
    return two_runs(chapter.lesson, chapter.contrast, runs, claim, "pure")


@picture("clipped_steps")
def clipped_steps(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """Chapter 10: the lost-update meter with each clipped (saturated) step annotated with its
    step, as the chart counts it, and its share."""
    figure = lost_update_figure(runs[chapter.lesson])
    figures = claim.figures
    steps, shares = figures.get("saturated_steps", []), figures.get("saturated_shares", [])
    notes = [
        note(f"step {step}: S doubled, {share:.2%} clipped", step, 100 * share, ay=-25)
        for step, share in zip(steps, shares, strict=True)
    ]
    return _annotate(figure, *notes)


def payoff_picture(chapter: Chapter, runs: Runs, claim: Claim) -> Figure:
    """A chapter's payoff: its training run's loss beside the payoff's contrast (the run
    without the chapter's remedy), and float32; no pure run (the route explains it later)."""
    return two_runs(chapter.payoff, chapter.payoff_contrast, runs, claim, "mixed")
