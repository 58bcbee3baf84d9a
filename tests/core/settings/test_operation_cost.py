"""The cost model counts the work precision per operation adds (a layer norm, a softmax
cross-entropy), by hand; the exercise's settings cost what they cost before."""

from __future__ import annotations

import math

from playground.core.model.models import ModelChoice, param_shapes
from playground.core.settings import cost
from playground.core.settings.settings import StepConfig

MLP = {"n": 100, "d_in": 10, "d_out": 5, "model": "mlp", "hidden_layers": 2, "hidden_width": 20}


def test_the_exercise_costs_no_operation_work():
    assert cost.operation_work(StepConfig()) == 0
    assert cost.operation_work(StepConfig(**MLP)) == 0


def test_a_layer_norm_and_a_softmax_by_hand():
    plain = StepConfig(**MLP)
    normed = plain.replace(norm="layernorm")
    # two norms of 20 entries per row, 24 multiply-adds each, over 100 rows
    assert cost.operation_work(normed) == 100 * 2 * 20 * 24
    # their scale and bias: 2 x 20 entries per norm, priced like every parameter entry
    assert cost.parameter_entries(normed.model_choice, 10, 5) == (
        cost.parameter_entries(plain.model_choice, 10, 5) + 2 * 2 * 20
    )
    entries = cost.parameter_entries(normed.model_choice, 10, 5)
    assert entries == sum(map(math.prod, param_shapes(normed.model_choice, 10, 5).values()))
    classes = plain.replace(task="classification")
    assert cost.operation_work(classes) == 100 * 5 * 16
    both = normed.replace(task="classification")
    assert (
        cost.step_work(both) - cost.step_work(plain)
        == 2 * (100 * 2 * 20 * 24 + 100 * 5 * 16 + 2 * 2 * 20 * 8) + 2 * 2 * 20 * 3072
    )  # and the report's work on the norms' entries
    # a norm's outputs are activations the step keeps: 2 x 20 per row, 8 bytes each
    assert cost.memory_bytes(normed) - cost.memory_bytes(plain) == (
        2 * 2 * 20 * 112 + 100 * 2 * 20 * 8
    )


def test_a_linear_model_has_nothing_to_normalise():
    assert cost.normalised_entries(ModelChoice("linear")) == 0
