"""The first call: what compiling a request's programs costs, priced as work by the cost model.

Rule: a request whose programs are not compiled yet (a new batch size, shape, model, recipe or
optimizer: a visitor can always pick one) first waits for XLA to trace and compile them, for
seconds whatever its batch. That wait is part of the request, so the cost model counts it::

    compile seconds   COMPILE[endpoint].base + the recipe's extra seconds
                      + dense layers x COMPILE[endpoint].per_layer x the recipe's factor
                        (x NORM_LAYER_FACTOR with a layer norm)
                      + CLASSIFICATION_SECONDS for a softmax loss
                      (the recipe's ``compile_on(endpoint)``: bfloat16's (1, 0))
    compile work      compile seconds x the endpoint's budget / BUDGET_SECONDS[endpoint]
                      (the endpoint's own multiply-adds: its budget takes BUDGET_SECONDS of
                      warm time on 2 vCPUs)
    first call        work + compile work <= first_call_budget(endpoint) = the budget x
                      FIRST_CALL_SECONDS / BUDGET_SECONDS[endpoint]

so a request takes at most about FIRST_CALL_SECONDS the first time and its budget's seconds
warm; FIRST_CALL_SECONDS is under 8 x the largest linear /step's warm time (0.39 to 0.55 s
measured, so 3.1 to 4.4 s). The seconds were measured by ``bench/bench_compile.py``,
which prints each configuration's first-call overhead beside this model's (the model must not
be below it). A model whose compile alone is over the first-call budget is refused naming
``hidden_layers`` and how many fit.

Example::

    >>> round(compile_seconds("step", "bfloat16", dense_layers=1), 2)
    0.93
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import NamedTuple, Protocol

from playground.core.bounds import ConfigError
from playground.core.caps import STEP_BUDGET, SWEEP_BUDGET, WORK_BUDGET
from playground.core.losses import TASKS
from playground.core.models import NORMS, ModelChoice
from playground.core.policy import recipe
from playground.core.recipe import COMPILE_ENDPOINTS


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
# Warm seconds of each endpoint's work budget on 2 vCPUs (bench/bench_load.py's largest
# accepted requests): the rate at which compile seconds become multiply-adds.
BUDGET_SECONDS = {"step": 2.1, "dynamics": 2.5, "sweep": 2.2}
BUDGETS = {"step": STEP_BUDGET, "dynamics": WORK_BUDGET, "sweep": SWEEP_BUDGET}
# A first call (compile and compute) may take this long on the reference machine: 8 x the
# largest linear /step's warm time was 3.1 to 4.4 s in bench/bench_load.py's runs.
FIRST_CALL_SECONDS = 3.0


def compile_seconds(
    endpoint: str,
    compute_dtype: str,
    dense_layers: int,
    norm: bool = False,
    classification: bool = False,
) -> float:
    """Seconds the first call of ``endpoint``'s programs compiles (see the module rule)."""
    cost = COMPILE[endpoint]
    factor, extra = recipe(compute_dtype).compile_on(endpoint)
    per_layer = cost.per_layer * factor * (NORM_LAYER_FACTOR if norm else 1.0)
    softmax = CLASSIFICATION_SECONDS if classification else 0.0
    return cost.base + extra + dense_layers * per_layer + softmax


def work_of_seconds(endpoint: str, seconds: float) -> float:
    """``seconds`` of warm time on the reference machine, in ``endpoint``'s multiply-adds."""
    return seconds * BUDGETS[endpoint] / BUDGET_SECONDS[endpoint]


def first_call_budget(endpoint: str) -> float:
    """The work a first call of ``endpoint`` may do, compile included (see the module rule)."""
    return work_of_seconds(endpoint, FIRST_CALL_SECONDS)


class Compiled(Protocol):
    """What the compile's price reads of a request's settings (a ``StepConfig``)."""

    n: int
    compute_dtype: str
    task: str

    @property
    def model_choice(self) -> ModelChoice: ...


def _seconds(config: Compiled, endpoint: str, choice: ModelChoice | None = None) -> float:
    choice = choice or config.model_choice
    return compile_seconds(
        endpoint,
        config.compute_dtype,
        dense_layers=choice.hidden_count + 1,
        norm=choice.norm != NORMS[0],
        classification=config.task != TASKS[0],
    )


def compile_work(config: Compiled, endpoint: str) -> float:
    """The compile of ``config``'s programs for ``endpoint``, in its multiply-adds."""
    return work_of_seconds(endpoint, _seconds(config, endpoint))


def check_compile(config: Compiled, endpoint: str) -> None:
    """ConfigError naming ``hidden_layers`` (and how many fit) when compiling ``config``'s
    programs for ``endpoint`` alone is over its first-call budget, whatever the batch."""
    seconds = _seconds(config, endpoint)
    if seconds < FIRST_CALL_SECONDS:
        return
    choice = config.model_choice
    fits = choice.hidden_layers - 1 if choice.hidden_count else 0
    while fits and _seconds(config, endpoint, dataclasses.replace(choice, hidden_layers=fits)) >= (
        FIRST_CALL_SECONDS
    ):
        fits -= 1
    field = "hidden_layers" if choice.hidden_count else "compute_dtype"
    advice = (
        f"at most {fits} hidden layer{'s' * (fits > 1)} fit{'s' * (fits == 1)}"
        if fits
        else "a linear model or another recipe fits"
    )
    raise ConfigError(
        field,
        f"{field}: the first {endpoint} of this model in {config.compute_dtype} compiles its "
        f"programs for about {seconds:.1f} s on this server's 2 vCPUs, whatever the batch, "
        f"more than the {FIRST_CALL_SECONDS:g} s a first call may take; {advice}.",
    )


def first_call_rows(config: Compiled, endpoint: str, work_at: Callable[[int], float]) -> int:
    """The largest N (at most ``config.n``) whose work ``work_at(N)`` plus the compile fits
    ``endpoint``'s first-call budget; 0 when none does."""
    room = first_call_budget(endpoint) - compile_work(config, endpoint)
    work = work_at(config.n)
    if work <= room:
        return config.n
    fits = max(0, math.floor(config.n * room / work))
    while fits and work_at(fits) > room:
        fits -= 1
    return fits


def check_first_call(config: Compiled, endpoint: str, work_at: Callable[[int], float]) -> None:
    """ConfigError when ``config``'s first call of ``endpoint`` (``work_at(N)``, its work at N
    batch rows, plus the compile) is over the first-call budget, naming ``n`` and the largest N
    that fits (or the model's size when none does). Callers check the compile alone first
    (``check_compile``), whose message names ``hidden_layers``."""
    fits = first_call_rows(config, endpoint, work_at)
    if fits == config.n:
        return
    first = f"a first {endpoint} of this model in {config.compute_dtype}"
    why = (
        f"compiling its programs takes about {_seconds(config, endpoint):.1f} s here, and with "
        f"its work ({work_at(config.n):,.0f} multiply-adds) the first call may not exceed "
        f"{first_call_budget(endpoint):,.0f} (about {FIRST_CALL_SECONDS:g} s)"
    )
    if fits == 0:
        field = "hidden_layers" if config.model_choice.hidden_count else "d_in"
        raise ConfigError(
            field, f"{field}: no N fits {first}: {why}. Fewer or narrower layers fit."
        )
    raise ConfigError(
        "n",
        f"n (batch rows N) must be at most {fits} for {first}: {why}; got {config.n}. A "
        "smaller N, fewer hidden layers or smaller widths fit.",
    )


def first_call_steps(config: Compiled, step_work: float) -> int:
    """The most training steps of ``step_work`` each whose run fits the first-call budget
    with its compile (0 when none does)."""
    room = first_call_budget("dynamics") - compile_work(config, "dynamics")
    return max(0, math.floor(room / step_work))
