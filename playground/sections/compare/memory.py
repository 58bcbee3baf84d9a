"""The memory of a real transformer under every recipe: its JSON, a table and stacked bars.

Rule: every number is read from the ledgers (``core.compare.architecture_ledger``); nothing is
typed in. One bar per recipe, in the registry's order, stacks BAR_PARTS in GiB: the parameter
parts (working weights, quantized copies and transposes, scales and amax history, gradients,
float32 masters, optimizer state), then the activations of one micro-batch. The table has a
column per recipe: its bytes per parameter, each parameter part's, then the totals.
"""

from __future__ import annotations

from typing import Any

from playground.core.compare.architecture_ledger import ArchitectureLedger, ArchitectureMemory
from playground.sections.compare.summary import readable_bytes
from playground.views.plotly import LEGEND_BELOW, Figure, axis, base_layout

GIB = 2**30
# The bars' parts: name -> (label, colour); the parameter parts first, as the ledger has them.
BAR_PARTS = {
    "working_weights": ("working weights", "#4e79a7"),
    "quantized_copies": ("quantized copies and transposes", "#f28e2b"),
    "scales_and_amax": ("scales and amax history", "#e15759"),
    "gradients": ("gradients", "#76b7b2"),
    "master_weights": ("float32 master weights", "#59a14f"),
    "optimizer_state": ("optimizer state", "#edc948"),
    "activations": ("activations", "#b07aa1"),
}
# The table's first column: a part per row, the recipes across (a recipe added is a column).
TABLE_CORNER = "per parameter (bytes), then in total"
ACTIVATION_WORDS = {
    "layers": "the layers",
    "recomputed_layer": "one layer recomputed",
    "output_layer": "the output layer (float32 logits)",
}


def _part_bytes(ledger: ArchitectureLedger, name: str) -> int:
    return ledger.activation_bytes if name == "activations" else ledger.parts[name]


def describe_model(memory: ArchitectureMemory) -> str:
    """The model and its training in a line: its shape, parameters, batch and choices."""
    model, setup = memory.model, memory.setup
    attention = "flash attention" if setup.flash_attention else "attention without flash"
    recompute = "full recomputation" if setup.recompute else "no recomputation"
    stateful = any(ledger.parts["optimizer_state"] for ledger in memory.ledgers)
    optimizer = (
        f"{setup.optimizer} with {setup.moments_dtype} state"
        if stateful
        else f"{setup.optimizer} (no optimizer state)"
    )
    return (
        f"{model.family} family, h = {model.hidden_size:,}, L = {model.num_hidden_layers}, "
        f"a = {model.num_attention_heads} ({model.num_key_value_heads} key/value heads), "
        f"i = {model.intermediate_size:,}, V = {model.vocab_size:,}: "
        f"{model.parameters:,} parameters ({model.quantized_parameters:,} in the layers' "
        f"GEMMs); s = {setup.sequence_length:,}, b = {setup.micro_batch}, {optimizer}, "
        f"{attention}, {recompute}"
    )


def architecture_json(memory: ArchitectureMemory) -> dict[str, Any]:
    """The ``architecture`` section of /compare's JSON: the model, its weights, the setup, and
    one ledger per recipe (each with ``bytes_per_param``)."""
    model = memory.model
    return {
        "model": model.to_dict(),
        "parameters": model.parameters,
        "quantized_parameters": model.quantized_parameters,
        "weights": [
            {"name": w.name, "shape": list(w.shape), "count": w.count, "quantized": w.quantized}
            for w in model.weights
        ],
        "setup": memory.setup.to_dict(),
        "memory": [ledger.as_dict() for ledger in memory.ledgers],
    }


def architecture_table(memory: ArchitectureMemory) -> str:
    """The ledgers as a Markdown table (see the module rule): a recipe per column, its bytes per
    parameter, each parameter part's, then its totals; under a line naming the model."""
    ledgers = memory.ledgers
    header = f"| {TABLE_CORNER} | " + " | ".join(ledger.recipe for ledger in ledgers) + " |"
    lines = [
        f"For {describe_model(memory)}.",
        "",
        header,
        "|" + " --- |" * (len(ledgers) + 1),
        "| **bytes per parameter** | "
        + " | ".join(f"**{ledger.bytes_per_param:.4g}**" for ledger in ledgers)
        + " |",
    ]
    for name in ledgers[0].parts:
        cells = (f"{ledger.parts[name] / ledger.parameters:.4g}" for ledger in ledgers)
        lines.append(f"| {BAR_PARTS[name][0]} | " + " | ".join(cells) + " |")
    totals = {
        "parameters": lambda ledger: ledger.parameter_bytes,
        "activations": lambda ledger: ledger.activation_bytes,
        "total": lambda ledger: ledger.total_bytes,
    }
    for label, value in totals.items():
        cells = (readable_bytes(value(ledger)) for ledger in ledgers)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    first = ledgers[0]
    split = ", ".join(
        f"{ACTIVATION_WORDS[name]} {readable_bytes(value)}"
        for name, value in first.activations.items()
        if value
    )
    lines.append(
        f"\nActivations of one micro-batch ({first.tokens:,} tokens) under {first.recipe}: "
        f"{split}. Every part's bytes, and one layer's by term, are in the JSON."
    )
    return "\n".join(lines)


def architecture_figure(memory: ArchitectureMemory) -> Figure:
    """The stacked bars of the module rule."""
    recipes = [ledger.recipe for ledger in memory.ledgers]
    data = []
    for name, (label, color) in BAR_PARTS.items():
        values = [_part_bytes(ledger, name) for ledger in memory.ledgers]
        per_param = [
            value / ledger.parameters for value, ledger in zip(values, memory.ledgers, strict=True)
        ]
        data.append(
            {
                "type": "bar",
                "name": label,
                "x": recipes,
                "y": [value / GIB for value in values],
                "customdata": per_param,
                "marker": {"color": color},
                "hovertemplate": "%{y:.4g} GiB (%{customdata:.3g} bytes per parameter)"
                f"<extra>{label}</extra>",
            }
        )
    model = memory.model
    size = (
        f"{model.parameters / 1e9:.3g}B"
        if model.parameters >= 1e9
        else f"{model.parameters / 1e6:.3g}M"
    )
    title = (
        f"Memory to train a {size}-parameter {model.family}-family model "
        f"at s = {memory.setup.sequence_length:,}, b = {memory.setup.micro_batch}, by recipe"
    )
    layout = base_layout(title, "recipe", "GiB", barmode="stack", height=460)
    layout["xaxis"] = axis("recipe", type="category")
    layout["legend"] = LEGEND_BELOW
    return {"data": data, "layout": layout}
