"""The first call: what compiling a request's programs costs, priced as work by the cost model.

Rule: a request whose programs are not compiled yet (a new batch size, shape, model, recipe or
optimizer: a visitor can always pick one) first waits for XLA to trace and compile them, for
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
                      warm time on 2 vCPUs)
    lane work         the compile work when the compile seconds reach FIRST_CALL_SECONDS, else
                      0 (``first_call_work``): such a /step is large work (``ui.launch``'s
                      lanes) and computes one at a time, within its visitor's share; sweeps and
                      training runs run one at a time in the heavy lane anyway
    /compare          every recipe's /step programs: the sum of their compile seconds, priced
                      as /step's (``compare_first_call_work``)

FIRST_CALL_SECONDS is under 8 x the largest linear /step's warm time (0.39 to 0.55 s measured,
so 3.1 to 4.4 s). The seconds were measured by ``bench/bench_compile.py``, which prints each
configuration's first-call overhead beside this model's (the model must not be below it).

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
    """One endpoint's compile time on the reference machine (2 vCPUs), in seconds: its fixed
    programs, and each dense layer's part of its step programs."""

    base: float
    per_layer: float


ENDPOINTS = COMPILE_ENDPOINTS
# Measured by bench/bench_compile.py on 2 vCPUs (first call minus warm call, bfloat16, MLPs of
# width 1024): each endpoint's programs for a linear model, and each further dense layer (its
# forward, backward, optimizer update and report in the mixed step and the float32 twin; the
# training run's three runs; the sweep's scales), fitted from above and rounded up.
COMPILE = {
    "step": CompileSeconds(base=0.45, per_layer=0.48),
    "dynamics": CompileSeconds(base=1.4, per_layer=0.22),
    "sweep": CompileSeconds(base=1.0, per_layer=0.48),
}
# A layer norm's forward, backward and statistics per dense layer (measured: about 1.3); a
# softmax cross-entropy's.
NORM_LAYER_FACTOR = 1.5
CLASSIFICATION_SECONDS = 0.1
# A transformer block's attention (scores, mask, softmax, values, their padding and reshapes),
# SwiGLU and residuals, in dense layers' compile time: its float16 /step report compiled 1.7 x
# as long as an MLP of its 8 dense layers (38.8 s against 22.9 s on a loaded 2-vCPU machine,
# width 16, the same N), 6.3 layers more; rounded up.
ATTENTION_LAYERS = 7
# Warm seconds of each endpoint's work budget on 2 vCPUs (bench/bench_load.py's largest
# accepted requests): the rate at which compile seconds become multiply-adds.
BUDGET_SECONDS = {"step": 2.1, "dynamics": 2.5, "sweep": 2.2}
BUDGETS = {"step": STEP_BUDGET, "dynamics": WORK_BUDGET, "sweep": SWEEP_BUDGET}
# A first call whose compile takes this long on the reference machine is large work: 8 x the
# largest linear /step's warm time was 3.1 to 4.4 s in bench/bench_load.py's runs.
FIRST_CALL_SECONDS = 3.0


def compile_seconds(
    endpoint: str,
    compute_dtype: str,
    dense_layers: int,
    norm: bool = False,
    classification: bool = False,
    attention: bool = False,
) -> float:
    """Seconds the first call of ``endpoint``'s programs compiles (see the module rule)."""
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
    """The work ``config``'s first call of ``endpoint`` adds for its lane: its compile work
    when the compile reaches FIRST_CALL_SECONDS, else 0 (see the module rule)."""
    if first_call_seconds(config, endpoint) < FIRST_CALL_SECONDS:
        return 0.0
    return compile_work(config, endpoint)


def compare_first_call_work(config: Compiled) -> float:
    """The work /compare's first call of ``config`` adds for its lane: the compile work of every
    recipe's /step programs together when their seconds reach FIRST_CALL_SECONDS, else 0."""
    seconds = sum(first_call_seconds(config, "step", name) for name in RECIPES)
    return work_of_seconds("step", seconds) if seconds >= FIRST_CALL_SECONDS else 0.0
