"""The start-up warm-up (ui.warm_up): it runs every request it lists, and can be turned off."""

from __future__ import annotations

from playground.core.models import MODELS
from playground.core.policy import COMPUTE_DTYPES
from playground.ui import warm_up


def test_the_warm_up_covers_every_recipe_and_kind_and_runs_them(monkeypatch):
    listed = warm_up.requests()
    kinds = [kind for kind, _ in listed]
    assert set(kinds) == {"step", "dynamics", "sweep"}
    steps = {(config.model, config.compute_dtype) for kind, config in listed if kind == "step"}
    assert steps == {(model, dtype) for model in MODELS for dtype in COMPUTE_DTYPES}
    ran = []
    real = warm_up.run
    monkeypatch.setattr(warm_up, "run", lambda kind, config: ran.append(real(kind, config)))
    thread = warm_up.start()
    thread.join(timeout=300)
    assert not thread.is_alive() and len(ran) == len(listed)


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
