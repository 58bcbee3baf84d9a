"""Warming the server's shared programs before the first visitors' requests.

Rule: at start, a background thread sends one tiny request of each kind (a step of every model
in every recipe, a short training run, a sweep) through the same code as the page's events, then
compiles the tensors tab's quantizers, and ends. What those compile and load is shared by
every shape (scalar casts, each recipe's statistics, the charts' code, lazily imported
modules): about a second of a server's first MLP /step, which the cost model does not count
(``core.compile_cost`` prices a request's own programs). ``PLAYGROUND_WARM_UP=0`` turns it off
(the tests' servers, which share 2 vCPUs with their browsers).
"""

from __future__ import annotations

import logging
import os
import threading
import time

from playground.core import compiled
from playground.core.models import MODELS
from playground.core.policy import COMPUTE_DTYPES
from playground.core.settings import StepConfig
from playground.core.sweep import run_sweep
from playground.core.tensors.report import warm_up as warm_tensors
from playground.core.train import run_dynamics
from playground.ui import endpoints
from playground.ui.arguments import STEP

# Tiny requests: their compiles are the shared programs', their work next to nothing.
TINY = {"n": 8, "d_in": 4, "d_out": 2, "hidden_layers": 1, "hidden_width": 8}


def requests() -> list[tuple[str, StepConfig]]:
    """(kind, config) of every warm-up request, in the order they run."""
    steps = [
        ("step", StepConfig(**TINY, model=model, compute_dtype=dtype))
        for model in MODELS
        for dtype in COMPUTE_DTYPES
    ]
    linear = StepConfig(n=8, d_in=4, d_out=2, steps=2)
    return [*steps, ("dynamics", linear), ("sweep", linear)]


def run(kind: str, config: StepConfig) -> None:
    """One warm-up request of ``kind``: the step through its endpoint (views and charts)."""
    if kind == "step":
        values = config.to_dict()
        endpoints.run_step(*[None if name == "data" else values[name] for name in STEP.order])
    elif kind == "dynamics":
        run_dynamics(config)
    else:
        run_sweep(config)


DONE = "warm-up done"  # printed when the thread ends (the benches wait for it)


def _warm() -> None:
    began = time.perf_counter()
    for kind, config in requests():
        try:
            run(kind, config)
        except Exception:  # a failed warm-up only leaves that program cold
            logging.getLogger(__name__).exception("warm-up %s failed", kind)
    warm_tensors()  # the block recipes' quantizers of the tensors tab: one program each
    compiled.forget_counted()  # else the next two new programs would clear them all
    print(f"{DONE} in {time.perf_counter() - began:.1f} s", flush=True)


def start() -> threading.Thread | None:
    """Start the warm-up thread (see the rule); None when PLAYGROUND_WARM_UP is 0."""
    if os.environ.get("PLAYGROUND_WARM_UP", "1") == "0":
        return None
    thread = threading.Thread(target=_warm, name="warm-up", daemon=True)
    thread.start()
    return thread
