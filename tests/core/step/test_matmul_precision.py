"""Every float32 matmul of every compiled program runs at ``highest`` precision.

On a GPU, JAX's default float32 matmul may use TF32 or bfloat16 passes; the float32 twin (and
float8's dequantized matmuls) would then no longer be float32. On this CPU backend the setting
changes no number; what is checked is the precision each program asks for, read from its
lowered StableHLO: every ``dot_general`` whose two operands are f32 says HIGHEST.
"""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

from playground import StepConfig, float32_step, run_dynamics, run_report, run_sweep
from playground.core.data.synthetic import make_batch
from playground.core.runs import sweep, train
from playground.core.step import report

DOT = re.compile(
    r"stablehlo\.dot_general .*?precision = \[(\w+), (\w+)\].*?: "
    r"\(tensor<(?:[^>]*x)?(\w+)>, tensor<(?:[^>]*x)?(\w+)>\)"
)
SMALL = {"n": 8, "d_in": 4, "d_out": 2}


class Lowered(Exception):
    """Raised by the stand-in for run_compiled once the program's text is kept."""


def lowered_text(module, run, config: StepConfig, monkeypatch) -> str:
    """The StableHLO of the program ``run(config)`` compiles (``module.run_compiled`` lowers
    it instead of running it)."""
    texts = []

    def lower(program, config, *extra, batch=None, **static):
        x, y = batch if batch is not None else make_batch(config)
        seed, lr, scale = np.uint32(config.model_seed), np.float32(config.lr), np.float32(1.0)
        texts.append(program.lower(seed, x, y, lr, scale, *extra, **static).as_text())
        raise Lowered

    monkeypatch.setattr(module, "run_compiled", lower)
    with pytest.raises(Lowered):
        run(config)
    return texts[0]


def dots(text: str) -> list[tuple[str, str, str, str]]:
    """(lhs precision, rhs precision, lhs element type, rhs element type) of every matmul."""
    found = DOT.findall(text)
    assert len(found) == text.count("stablehlo.dot_general"), "a matmul the pattern missed"
    return found


def assert_float32_matmuls_at_highest(text: str) -> int:
    float32_dots = [d for d in dots(text) if d[2:] == ("f32", "f32")]
    assert float32_dots, "no float32 matmul found: the float32 twin is missing"
    assert all(d[:2] == ("HIGHEST", "HIGHEST") for d in float32_dots), float32_dots
    return len(float32_dots)


PROGRAMS = {
    "report": (report, run_report),
    "sweep": (sweep, run_sweep),
    "dynamics": (train, run_dynamics),
}


@pytest.mark.parametrize("compute_dtype", ["bfloat16", "float8"])
@pytest.mark.parametrize("program", list(PROGRAMS))
def test_every_float32_matmul_asks_for_highest_precision(program, compute_dtype, monkeypatch):
    module, run = PROGRAMS[program]
    config = StepConfig(**SMALL, compute_dtype=compute_dtype, steps=2)
    text = lowered_text(module, run, config, monkeypatch)
    assert_float32_matmuls_at_highest(text)
    if compute_dtype == "bfloat16":  # the mixed step's own matmuls stay bfloat16
        assert any(d[2:] == ("bf16", "bf16") for d in dots(text)), dots(text)


def test_the_public_float32_step_asks_for_highest_precision():
    x, y = make_batch(StepConfig(**SMALL))
    text = jax.jit(lambda x, y: float32_step(0, x, y, 0.1)).lower(x, y).as_text()
    # forward, and the kernel's gradient in the backward pass
    assert assert_float32_matmuls_at_highest(text) >= 2


def test_the_pattern_sees_a_default_precision_matmul():
    """The check can fail: a plain float32 matmul lowers with DEFAULT precision."""
    a = np.ones((2, 2), np.float32)
    text = jax.jit(lambda a: a @ a).lower(a).as_text()
    assert dots(text) == [("DEFAULT", "DEFAULT", "f32", "f32")]
