"""The pictures of the route's chapters on block scaling, precision per operation and the
transformer block (chapters 11-17): each draws the contrast its chapter's claim argues, with the
claim's numbers as labels.

Rule: a picture is a function of the chapter, its runs (lesson id -> run: its lesson, payoff and
contrasts, ``core.lessons.route``) and its lesson's claim (whose ``figures`` hold what the claim
computed beyond the runs), returning a Plotly figure dict; nothing is computed here. The
pictures::

    block_scales     one tensor's scale per tensor (a line) beside its scale per block of 32
                     (a point per block, row by row), log2; the outlier's block ringed
    operations       the forward pass's operations in order, one row per run (the lesson's,
                     then the one it is read against): each a marker of its dtype, a red cross
                     where its result is not finite; each row's first non-finite one labelled
    loss_grid        the loss of the same logits in float32 and in the compute dtype, on the
                     compute dtype's values around them (the spacing visible)
    loss_staircase   the loss over the steps, computed in the compute dtype (a staircase)
                     against float32 (smooth)

A claim without its figures (its run is not the lesson's kind) gets a note with its condition.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from playground.core.lessons import Claim
from playground.core.lessons.route import Chapter
from playground.core.lessons.transformer import SCORES
from playground.core.step.operations_report import OperationReport
from playground.sections.route.pictures import picture, wrapped
from playground.views.plotly import (
    FLOAT32_COLOR,
    MIXED_COLOR,
    OVERFLOW_COLOR,
    TEXT_COLOR,
    WARNING_TEXT_COLOR,
    Figure,
    base_layout,
    empty_note,
    line_trace,
)

# One line of title: the route's charts are short (``view.CHART_HEIGHT``).
MARGIN = {"l": 10, "r": 10, "t": 40, "b": 10}
NOTE_SIZE = 11


def _not_drawn(title: str, claim: Claim) -> Figure:
    """A picture whose claim computed none of its figures: its condition, in words."""
    layout = base_layout(title, "", "", margin=MARGIN)
    layout["annotations"] = [empty_note(f"Not drawn: {claim.condition}")]
    return {"data": [], "layout": layout}


# Characters a note's line holds: a note beside a point stays inside a chart a phone draws
# 300 px wide, its rows' labels taking a third of it.
NOTE_LINE = 24


def _wrapped(text: str) -> str:
    """``text`` in lines of at most NOTE_LINE characters (its own line breaks kept)."""
    return wrapped(text, NOTE_LINE)


def _note(text: str, **place: Any) -> dict[str, Any]:
    """A label at ``place`` (Plotly's annotation keys), an arrow from it unless told."""
    return {"text": text, "font": {"size": NOTE_SIZE, "color": TEXT_COLOR}, **place}


# -- block_scales ------------------------------------------------------------------------------


@picture("block_scales")
def block_scales(chapter: Chapter, runs: Mapping, claim: Claim) -> Figure:
    """The ``block_scales`` picture of the module rule, from ``claim.figures``
    (``core.lessons.blocks.scale_figures``)."""
    figures = claim.figures
    if "block_log2" not in figures:
        return _not_drawn("Scales per tensor and per block", claim)
    tensor, block = figures["tensor"], figures["block"]
    scales = figures["block_log2"]
    rows, columns = scales.shape
    per_tensor = figures["per_tensor_log2"]
    outliers = figures["outlier_blocks"]
    outlier_x = [row * columns + column for row, column in outliers]
    outlier_y = [float(scales[row, column]) for row, column in outliers]
    count = rows * columns
    layout = base_layout(
        f"{tensor}: one scale per tensor against one per block of {block}",
        f"block of {block}, row by row ({columns} per row)",
        "scale, log2",
        margin=MARGIN,
    )
    layout["yaxis"]["dtick"] = 4
    data = [
        line_trace(
            [0, count - 1],
            [per_tensor, per_tensor],
            f"one scale per tensor (float8): loses {figures['per_tensor_lost']:.1%} to zero "
            "or subnormals",
            OVERFLOW_COLOR,
            hovertemplate=f"per-tensor scale 2^{per_tensor:.3g}<extra></extra>",
        ),
        {
            "type": "scatter",
            "mode": "markers",
            "x": list(range(count)),
            "y": [float(v) for v in scales.ravel()],
            "customdata": [[r, c] for r in range(rows) for c in range(columns)],
            "name": f"one scale per block ({figures['recipe']}): keeps "
            f"{figures['block_normal']:.1%} as "
            "normal E4M3",
            "marker": {"color": FLOAT32_COLOR, "size": 4},
            "hovertemplate": "row %{customdata[0]}, block %{customdata[1]}: scale 2^%{y}"
            "<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "x": outlier_x,
            "y": outlier_y,
            "name": _outliers_named(outliers),
            "marker": {
                "color": "rgba(0,0,0,0)",
                "size": 14,
                "line": {"color": WARNING_TEXT_COLOR, "width": 2},
            },
            "hoverinfo": "skip",
        },
    ]
    top = max(range(len(outliers)), key=outlier_y.__getitem__)
    what = "block: scale" if len(outliers) == 1 else f"{len(outliers)} blocks: scales up to"
    notes = [
        _note(
            f"the outlier's {what} 2^{outlier_y[top]:g}",
            x=outlier_x[top],
            y=outlier_y[top],
            ax=-60 if outlier_x[top] > count / 2 else 60,
            ay=30,
        ),
        _note(
            f"per tensor: 2^{per_tensor:.3g}, the same for every block",
            x=0,
            y=per_tensor,
            xanchor="left",
            yanchor="bottom",
            showarrow=False,
        ),
    ]
    if "x_lost" in figures:
        notes.append(
            _note(
                f"x itself, one scale per tensor: {figures['x_lost']:.1%} lost",
                x=1,
                y=0.02,
                xref="paper",
                yref="paper",
                xanchor="right",
                yanchor="bottom",
                showarrow=False,
            )
        )
    layout["annotations"] = notes
    return {"data": data, "layout": layout}


def _outliers_named(outliers: Sequence[tuple[int, int]]) -> str:
    """The legend's name of the outlier's blocks, by row and block."""
    if len(outliers) == 1:
        ((row, column),) = outliers
        return f"the outlier's block (row {row}, block {column})"
    rows = ", ".join(str(row) for row in dict.fromkeys(row for row, _ in outliers))
    return f"the outlier's blocks ({len(outliers)}, in rows {rows})"


# -- operations --------------------------------------------------------------------------------


def _operation_traces(rows: Sequence[tuple[str, Sequence[OperationReport]]]) -> list[Figure]:
    """One trace per (dtype, finite) pair present: a marker per operation on its row."""
    groups: dict[tuple[str, bool], list[tuple[str, str]]] = {}
    for label, operations in rows:
        for op in operations:
            groups.setdefault((op.dtype, op.forward_finite), []).append((op.name, label))
    traces = []
    for (dtype, finite), points in groups.items():
        if finite:
            color = FLOAT32_COLOR if dtype == "float32" else MIXED_COLOR
            marker = {"color": color, "size": 11, "symbol": "circle"}
        else:
            marker = {"color": OVERFLOW_COLOR, "size": 13, "symbol": "x"}
        name = f"{dtype}: {'finite' if finite else 'inf or NaN'}"
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "x": [name_ for name_, _ in points],
                "y": [label for _, label in points],
                "name": name,
                "marker": marker,
                "hovertemplate": "%{x} (%{y}): " + name + "<extra></extra>",
            }
        )
    return traces


def operations_figure(
    title: str,
    rows: Sequence[tuple[str, Sequence[OperationReport]]],
    notes: Sequence[tuple[str, str, str]],
) -> Figure:
    """The ``operations`` picture: ``rows`` ((label, operations), from the top down) and
    ``notes`` ((row label, operation name, text): a label pointing at that operation's marker,
    from its right on the row's left half and from its left on the right half, in the warning
    colour where the operation's result is not finite)."""
    labels = [label for label, _ in rows]
    finite = {(label, op.name): op.forward_finite for label, ops in rows for op in ops}
    # A label on the right half of the row reads leftwards, so it stays inside the figure.
    right = {op.name: 2 * index > len(ops) for _, ops in rows for index, op in enumerate(ops)}
    layout = base_layout(title, "", "", margin=MARGIN)
    layout["xaxis"] |= {
        "type": "category",
        "categoryorder": "array",  # the forward pass's order, as the title says
        "categoryarray": [op.name for op in rows[0][1]],
        "tickangle": -35,
        "title": {"text": ""},
    }
    layout["yaxis"] |= {
        "type": "category",
        "categoryorder": "array",
        "categoryarray": labels[::-1],
        "title": {"text": ""},
        "range": [-0.6, len(labels) - 0.1],
    }
    layout["annotations"] = [
        _note(
            _wrapped(text),
            x=name,
            y=label,
            ax=-30 if right[name] else 30,
            ay=-24,
            xanchor="right" if right[name] else "left",
            font={
                "size": NOTE_SIZE,
                "color": TEXT_COLOR if finite[label, name] else WARNING_TEXT_COLOR,
            },
        )
        for label, name, text in notes
    ]
    return {"data": _operation_traces(rows), "layout": layout}


def _norm(operations: Sequence[OperationReport]) -> str:
    return next(op.name for op in operations if op.kind == "normalisation")


@picture("operations_layernorm")
def operations_layernorm(chapter: Chapter, runs: Mapping, claim: Claim) -> Figure:
    """Chapter 12: the float16 model's operations under exercise against autocast."""
    title = "Operations in order: exercise against autocast"
    figures = claim.figures
    if "contrast" not in figures:
        return _not_drawn(title, claim)
    report = runs[chapter.lesson]
    first, autocast = report.first_nonfinite["forward"], figures["contrast"]
    rows = [
        (f"exercise ({report.config.compute_dtype})", report.operations),
        ("autocast", autocast),
    ]
    notes = []
    if first is not None:
        why = (
            f"first inf: its variance. Outputs reach {figures['largest_activation']:.0f},"
            f"<br>past sqrt({figures['largest_value']:g}) = {figures['bound']:.1f}; "
            "1/sqrt(inf) = 0 erases those rows"
        )
        notes.append((rows[0][0], first, why))
    norm = _norm(autocast)
    said = "every operation finite" if figures["contrast_first"] is None else ""
    notes.append(("autocast", norm, f"layer norm in {_dtype_of(autocast, norm)}: {said}"))
    return operations_figure(title, rows, notes)


def _dtype_of(operations: Sequence[OperationReport], name: str) -> str:
    return next(op.dtype for op in operations if op.name == name)


@picture("operations_attention")
def operations_attention(chapter: Chapter, runs: Mapping, claim: Claim) -> Figure:
    """Chapter 15: the block's operations in float16 under exercise against autocast."""
    title = "Operations in order: exercise against autocast"
    figures = claim.figures
    if "contrast" not in figures:
        return _not_drawn(title, claim)
    report = runs[chapter.lesson]
    dtype = report.config.compute_dtype
    first, then = report.first_nonfinite["forward"], figures["contrast_first"]
    rows = [(f"exercise ({dtype})", report.operations), ("autocast", figures["contrast"])]
    notes = []
    if first is not None:
        why = (
            f"first inf: scores reach {figures['largest_score']:.3g},"
            f"<br>past {dtype}'s {figures['largest_value']:g}"
        )
        notes.append((rows[0][0], first, why))
    if then is not None:
        notes.append(
            (
                "autocast",
                then,
                f"first inf under autocast: {then} ({_dtype_of(figures['contrast'], then)})",
            )
        )
    return operations_figure(title, rows, notes)


@picture("operations_bfloat16")
def operations_bfloat16(chapter: Chapter, runs: Mapping, claim: Claim) -> Figure:
    """Chapter 16: the block's operations in bfloat16 against float16."""
    figures = claim.figures
    report = runs[chapter.lesson]
    dtype = report.config.compute_dtype
    against = figures.get("contrast_dtype", "")
    title = f"Operations in order: {dtype} against {against}"
    if "contrast" not in figures:
        return _not_drawn(title, claim)
    first16 = figures["contrast_first"]
    rows = [(dtype, report.operations), (against, figures["contrast"])]
    fits = (
        f"scores reach {figures['largest_score']:.3g},<br>under {dtype}'s "
        f"{figures['largest_value']:.3g};<br>loss {figures['loss']:.4g}, "
        f"float32's {figures['float32_loss']:.4g} ({figures['relative']:.2%} apart)"
    )
    notes = [(dtype, SCORES, fits)]
    if first16 is not None:
        notes.append((against, first16, f"{against}'s first inf: {first16}"))
    return operations_figure(title, rows, notes)


# -- loss_grid and loss_staircase --------------------------------------------------------------


@picture("loss_grid")
def loss_grid(chapter: Chapter, runs: Mapping, claim: Claim) -> Figure:
    """Chapter 13: the two losses of the same logits on the compute dtype's values."""
    report = runs[chapter.lesson]
    dtype = report.config.compute_dtype
    title = f"The loss of the same logits, in float32 and in {dtype}"
    figures = claim.figures
    if "grid" not in figures:
        return _not_drawn(title, claim)
    low = report.mixed_initial_loss_in_compute_dtype
    high = report.mixed_initial_loss_in_float32
    grid = [float(v) for v in figures["grid"]]
    rows = ["computed in float32", f"computed in {dtype}"]
    layout = base_layout(title, "loss", "", margin=MARGIN)
    layout["yaxis"] |= {
        "type": "category",
        "categoryorder": "array",
        "categoryarray": rows[::-1],
        "title": {"text": ""},
    }
    layout["xaxis"] |= {"tickvals": grid, "tickformat": ".6g", "tickangle": -35}
    columns = [x for value in grid for x in (value, value, None)]
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": columns,
            "y": [y for _ in grid for y in (rows[0], rows[1], None)],
            "name": f"{dtype} values ({figures['spacing']:g} apart here)",
            "line": {"color": MIXED_COLOR, "width": 1, "dash": "dot"},
            "hoverinfo": "skip",
        },
        {
            "type": "scatter",
            "mode": "markers",
            "x": [high],
            "y": [rows[0]],
            "name": f"float32: {high:.7g}",
            "marker": {"color": FLOAT32_COLOR, "size": 13, "symbol": "diamond"},
        },
        {
            "type": "scatter",
            "mode": "markers",
            "x": [low],
            "y": [rows[1]],
            "name": f"{dtype}: {low:.7g}",
            "marker": {"color": MIXED_COLOR, "size": 13},
        },
    ]
    layout["annotations"] = [
        _note(f"float32: {high:.7g}", x=high, y=rows[0], ax=0, ay=-22),
        _note(
            f"{dtype}: {low:.7g}, {figures['relative']:.2%} from float32's",
            x=low,
            y=rows[1],
            ax=0,
            ay=22,
        ),
    ]
    return {"data": data, "layout": layout}


@picture("loss_staircase")
def loss_staircase(chapter: Chapter, runs: Mapping, claim: Claim) -> Figure:
    """Chapter 14: the loss over the steps, computed in the compute dtype against float32."""
    report = runs[chapter.lesson]
    dtype = report.config.compute_dtype
    title = f"The loss over the steps, computed in {dtype} and in float32"
    figures = claim.figures
    if "exercise" not in figures:
        return _not_drawn(title, claim)
    exercise, autocast = figures["exercise"], figures["autocast"]
    steps = list(range(1, len(exercise) + 1))
    layout = base_layout(title, "step", "loss", margin=MARGIN)
    data = [
        line_trace(
            steps,
            exercise,
            f"exercise, loss in {dtype}: {figures['levels']} values in {len(steps)} steps",
            MIXED_COLOR,
            line={"color": MIXED_COLOR, "width": 2, "shape": "hv"},
            mode="lines+markers",
        ),
        line_trace(
            steps,
            autocast,
            f"autocast, loss in float32: {figures['moves']} values",
            FLOAT32_COLOR,
            mode="lines+markers",
        ),
    ]
    jump_step = figures["jump_step"]
    layout["annotations"] = [
        _note(
            f"jumps by {figures['jump']:g}; {dtype} values here are {figures['spacing']:g} apart",
            x=jump_step,
            y=float(exercise[jump_step - 1]),
            ax=40,
            ay=-30,
            xanchor="left",
        )
    ]
    return {"data": data, "layout": layout}
