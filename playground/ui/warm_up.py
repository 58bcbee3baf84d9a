"""Warming the server's programs before the first visitors' requests.

Rule: at start, a background thread sends one request of each combination a visitor can pick
without touching a number (every endpoint x model x recipe at the page's defaults: the page's
own step first, then the other steps, the training runs, the sweeps) through the same code as
the page's events, then compiles the tensors tab's quantizers, and ends. Their programs stay
compiled (``core.compiled`` keeps the most recently used; ``core.compile_cache`` saves them on
disk, so a restarted server reads them back), along with what every shape shares (scalar casts,
each recipe's statistics, the charts' code, lazily imported modules). ``PLAYGROUND_WARM_UP=0``
turns it off (the tests' servers, which share 2 vCPUs with their browsers)."""

from __future__ import annotations

import logging
import os
import threading
import time

from playground.core.models import MODELS
from playground.core.policy import COMPUTE_DTYPES
from playground.core.settings import StepConfig
from playground.core.sweep import run_sweep
from playground.core.tensors.report import warm_up as warm_tensors
from playground.core.train import run_dynamics
from playground.ui import endpoints
from playground.ui.arguments import STEP


def requests() -> list[tuple[str, StepConfig]]:
    """(kind, config) of every warm-up request, in the order they run."""
    combinations = [
        StepConfig(model=model, compute_dtype=dtype) for model in MODELS for dtype in COMPUTE_DTYPES
    ]
    return [(kind, config) for kind in ("step", "dynamics", "sweep") for config in combinations]


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
    print(f"{DONE} in {time.perf_counter() - began:.1f} s", flush=True)


def start() -> threading.Thread | None:
    """Start the warm-up thread (see the rule); None when PLAYGROUND_WARM_UP is 0."""
    if os.environ.get("PLAYGROUND_WARM_UP", "1") == "0":
        return None
    thread = threading.Thread(target=_warm, name="warm-up", daemon=True)
    thread.start()
    return thread
