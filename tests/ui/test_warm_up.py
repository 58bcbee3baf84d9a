"""The start-up warm-up (ui.warm_up): it runs every request it lists, and can be turned off."""

from __future__ import annotations

from playground.core.models import MODELS
from playground.core.policy import COMPUTE_DTYPES
from playground.core.settings import StepConfig
from playground.ui import warm_up


def test_the_warm_up_covers_every_default_combination_and_runs_them(monkeypatch):
    listed = warm_up.requests()
    # every endpoint x model x recipe once, at the page's defaults otherwise, the page's first
    combinations = [(kind, c.model, c.compute_dtype) for kind, c in listed]
    expected = {
        (k, m, d) for k in ("step", "dynamics", "sweep") for m in MODELS for d in COMPUTE_DTYPES
    }
    assert len(combinations) == len(expected) and set(combinations) == expected
    assert combinations[0] == ("step", "linear", "bfloat16")
    page = StepConfig()
    assert all(
        c.replace(model=page.model, compute_dtype=page.compute_dtype) == page for _, c in listed
    )
    # the thread runs each listed request (here one of each kind, at a small shape: the 36
    # default combinations answer in tests/app/test_defaults.py)
    small = [(kind, config.replace(n=8, d_in=4, d_out=2, steps=2)) for kind, config in listed[::12]]
    monkeypatch.setattr(warm_up, "requests", lambda: small)
    ran = []
    real = warm_up.run
    monkeypatch.setattr(warm_up, "run", lambda kind, config: ran.append(real(kind, config)))
    thread = warm_up.start()
    thread.join(timeout=300)
    assert not thread.is_alive() and len(ran) == len(small) == 3


def test_a_failing_request_leaves_the_others_running(monkeypatch):
    ran = []

    def run(kind, config):
        ran.append(kind)
        if len(ran) == 1:
            raise RuntimeError("compile failed")

    monkeypatch.setattr(warm_up, "run", run)
    warm_up.start().join(timeout=10)
    assert len(ran) == len(warm_up.requests())


def test_it_is_off_when_asked(monkeypatch):
    monkeypatch.setenv("PLAYGROUND_WARM_UP", "0")
    assert warm_up.start() is None
