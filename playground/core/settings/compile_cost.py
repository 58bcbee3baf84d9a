"""The first call: what compiling a request's programs costs, priced as work by the cost model.

Rule: a request whose programs are not compiled yet (a new batch size, shape, model, recipe or
optimizer: a user can always pick one) first waits for XLA to trace and compile them, for
seconds whatever its batch. That wait is a one-off per program (``core.step.compiled`` keeps the
program, the persistent compilation cache keeps it across restarts), so it never refuses a
request: the warm work caps and the memory bound (``core.settings.cost``) do. It prices where the
first call runs::

    compile seconds   COMPILE[endpoint].base + the recipe's extra seconds
                      + dense layers x COMPILE[endpoint].per_layer x the recipe's factor
                        (x NORM_LAYER_FACTOR with a layer norm)
                      + CLASSIFICATION_SECONDS for a softmax loss
                      + ATTENTION_LAYERS x COMPILE[endpoint].per_layer x the recipe's factor
                        for a transformer's attention block
                      (dense layers: the model's Layout.dense, a chain's hidden layers + 1)
                      (the recipe's ``compile_on(endpoint)``: bfloat16's (1, 0))
    compile work      compile seconds x the endpoint's budget / BUDGET_SECONDS[endpoint]
                      (the endpoint's own multiply-adds: its budget takes BUDGET_SECONDS of
                      warm time on the reference machine)
    first-call work   the compile work when the compile seconds reach FIRST_CALL_SECONDS, else
                      0 (``first_call_work``): such a /step counts as large work, which
                      ``ui.launch`` runs one request at a time, within its client's share;
                      sweeps and training runs run one at a time in the ``heavy`` concurrency
                      group anyway
    /compare          every recipe's /step programs: the sum of their compile seconds, priced
                      as /step's (``compare_first_call_work``)

The reference machine is a public Space's 2 vCPUs. FIRST_CALL_SECONDS sits below 8 x the
largest linear /step's warm time. ``bench/bench_compile.py`` prints each configuration's
first-call overhead beside this model's (the model must not be below it).

Example::

    >>> round(compile_seconds("step", "bfloat16", dense_layers=1), 2)
    0.93
"""

from __future__ import annotations

from typing import NamedTuple, Protocol

from playground.core.caps import STEP_BUDGET, SWEEP_BUDGET, WORK_BUDGET
from playground.core.model.losses import TASKS
from playground.core.model.models import MODELS, NORMS, ModelChoice
from playground.core.recipes.registry import COMPILE_ENDPOINTS, RECIPES, recipe


class CompileSeconds(NamedTuple):
    """One endpoint's compile time on the reference machine, in seconds.

    Attributes:
      base: its fixed programs (a linear model's).
      per_layer: each further dense layer's part of its step programs.
    """

    base: float
    per_layer: float


ENDPOINTS = COMPILE_ENDPOINTS
# Fitted from above to bench/bench_compile.py's first-call overheads (first call minus warm call,
# bfloat16, MLPs of width 1024) and rounded up: each endpoint's programs for a linear model, and
# each further dense layer (its forward, backward, optimizer update and report in the mixed step
# and the float32 twin; the training run's three runs; the sweep's scales).
COMPILE = {
    "step": CompileSeconds(base=0.45, per_layer=0.48),
    "dynamics": CompileSeconds(base=1.4, per_layer=0.22),
    "sweep": CompileSeconds(base=1.0, per_layer=0.48),
}
# A layer norm's forward, backward and statistics per dense layer, as a factor; a softmax
# cross-entropy's, in seconds.
NORM_LAYER_FACTOR = 1.5
CLASSIFICATION_SECONDS = 0.1
# A transformer block's attention (scores, mask, softmax, values, their padding and reshapes),
# SwiGLU and residuals, counted as this many extra dense layers' compile time (against an MLP
# of its 8 dense layers; rounded up).
ATTENTION_LAYERS = 7
# Warm seconds of each endpoint's work budget on the reference machine (bench/bench_load.py's
# largest accepted requests): the rate at which compile seconds become multiply-adds.
BUDGET_SECONDS = {"step": 2.1, "dynamics": 2.5, "sweep": 2.2}
BUDGETS = {"step": STEP_BUDGET, "dynamics": WORK_BUDGET, "sweep": SWEEP_BUDGET}
# A first call whose compile takes this long on the reference machine is large work (below 8 x
# the largest linear /step's warm time, which bench/bench_load.py prints).
FIRST_CALL_SECONDS = 3.0


def compile_seconds(
    endpoint: str,
    compute_dtype: str,
    dense_layers: int,
    norm: bool = False,
    classification: bool = False,
    attention: bool = False,
) -> float:
    """Seconds the first call of ``endpoint``'s programs compiles (see the module rule).

    Args:
      endpoint: "step", "dynamics" or "sweep".
      compute_dtype: a recipe's name (``core.recipes.registry.RECIPES``).
      dense_layers: the model's dense matmuls (a chain's hidden layers + 1).
      norm, classification, attention: whether the model has a layer norm, a softmax
        cross-entropy loss and a transformer's attention block.

    Returns:
      The estimated compile time on the reference machine, in seconds.
    """
    cost = COMPILE[endpoint]
    factor, extra = recipe(compute_dtype).compile_on(endpoint)
    per_layer = cost.per_layer * factor * (NORM_LAYER_FACTOR if norm else 1.0)
    softmax = CLASSIFICATION_SECONDS if classification else 0.0
    block = ATTENTION_LAYERS * cost.per_layer * factor if attention else 0.0
    return cost.base + extra + (dense_layers * per_layer) + softmax + block


def work_of_seconds(endpoint: str, seconds: float) -> float:
    """``seconds`` of warm time on the reference machine, in ``endpoint``'s multiply-adds."""
    return seconds * BUDGETS[endpoint] / BUDGET_SECONDS[endpoint]


class Compiled(Protocol):
    """What the compile's price reads of a request's settings (a ``StepConfig``)."""

    n: int
    compute_dtype: str
    task: str

    @property
    def model_choice(self) -> ModelChoice: ...


def first_call_seconds(config: Compiled, endpoint: str, compute_dtype: str | None = None) -> float:
    """The compile seconds of ``config``'s first call of ``endpoint`` (in ``compute_dtype``
    when given): ``compile_seconds`` of its model's layout, norm, task and attention."""
    choice = config.model_choice
    # Every dense matmul of the model's layout (a chain's hidden layers + 1).
    layout = MODELS[choice.name].layout(choice, 1, 1)
    return compile_seconds(
        endpoint,
        compute_dtype or config.compute_dtype,
        dense_layers=len(layout.dense),
        norm=choice.norm != NORMS[0],
        classification=config.task != TASKS[0],
        attention=any(kind == "attention" for kind, _ in layout.kept),
    )


def compile_work(config: Compiled, endpoint: str) -> float:
    """The compile of ``config``'s programs for ``endpoint``, in its multiply-adds."""
    return work_of_seconds(endpoint, first_call_seconds(config, endpoint))


def first_call_work(config: Compiled, endpoint: str) -> float:
    """The work ``config``'s first call of ``endpoint`` adds to its request's price: its
    compile work when the compile reaches FIRST_CALL_SECONDS, else 0 (see the module rule)."""
    if first_call_seconds(config, endpoint) < FIRST_CALL_SECONDS:
        return 0.0
    return compile_work(config, endpoint)


def compare_first_call_work(config: Compiled) -> float:
    """The work /compare's first call of ``config`` adds to its request's price: the compile
    work of every recipe's /step programs together when their seconds reach FIRST_CALL_SECONDS,
    else 0."""
    seconds = sum(first_call_seconds(config, "step", name) for name in RECIPES)
    return work_of_seconds("step", seconds) if seconds >= FIRST_CALL_SECONDS else 0.0
