"""The export's PyTorch note: what it says for each loss-scaling mode, dtype, recipe and scale.

Its numeric claims (a step within the dtype's eps, float32 within FLOAT32_AGREEMENT) are measured
against PyTorch in tests/views/test_export_torch.py; here, that each setting gets its sentence.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from playground import StepConfig
from playground.core.recipes.registry import RECIPES, recipe
from playground.views.export import SCRIPT_DTYPES
from playground.views.export_note import FLOAT8_AGREEMENT, pytorch_note, uses_grad_scaler


@pytest.mark.parametrize("dtype", SCRIPT_DTYPES)
def test_the_note_names_autocast_and_the_dtype_s_eps(dtype):
    note = pytorch_note(StepConfig(compute_dtype=dtype))
    assert f'torch.autocast(device_type="cpu", dtype=torch.{dtype})' in note
    exponent = int(np.log2(ml_dtypes.finfo(np.dtype(dtype)).eps))
    assert f"eps (2^{exponent})" in note and "Not bit for bit" in note
    assert "mse_loss` in float32" in note and "1e-5" in note


def test_each_scaling_mode_says_how_grad_scaler_differs():
    float16 = {"compute_dtype": "float16"}
    none = pytorch_note(StepConfig(**float16, mode="none"))
    assert "GradScaler(enabled=False)" in none and "skips" not in none
    static = pytorch_note(StepConfig(**float16, mode="static", loss_scale=2.0**12))
    assert "S = 2^12" in static and "update(new_scale=S)" in static
    assert "skips a step with inf or NaN gradients even so" in static
    dynamic = pytorch_note(StepConfig(**float16, mode="dynamic", period=7, loss_scale=2.0**-3))
    assert "growth_interval=7" in dynamic and "no floor and no cap" in dynamic
    # The page's floor is min(1, start): the start itself when it is below 1.
    assert "never goes below 2^-3" in dynamic


@pytest.mark.parametrize("dtype", ["bfloat16", "float8"])
def test_bfloat16_and_float8_scale_without_grad_scaler(dtype):
    """A dtype with float32's exponent range (bfloat16) or scales of its own (float8): the
    page's S as a multiply and divide, its dynamic rule written out, floor and all."""
    assert uses_grad_scaler("float16") and not uses_grad_scaler(dtype)
    static = pytorch_note(StepConfig(compute_dtype=dtype, loss_scale=2.0**12))
    assert "S = 2^12, no GradScaler" in static and "every step applied" in static
    assert "GradScaler(" not in static
    dynamic = pytorch_note(StepConfig(compute_dtype=dtype, mode="dynamic", loss_scale=2.0**-3))
    assert "`LossScale`" in dynamic and "never below 2^-3" in dynamic
    assert "No loss scale**: S = 1" in pytorch_note(StepConfig(compute_dtype=dtype, mode="none"))


def test_a_scale_beyond_float16_is_named():
    largest = float(ml_dtypes.finfo(np.float16).max)
    over = pytorch_note(StepConfig(compute_dtype="float16", loss_scale=2.0**17))
    assert f"above {largest:g}" in over and "Your S = 2^17 is above it" in over
    under = pytorch_note(StepConfig(compute_dtype="float16", loss_scale=2.0**10))
    assert "range" not in under
    # bfloat16 reaches float32's range: no such line, even for a dynamic scale.
    assert "range" not in pytorch_note(StepConfig(mode="dynamic", loss_scale=2.0**100))
    assert "range" in pytorch_note(StepConfig(compute_dtype="float16", mode="dynamic"))


@pytest.mark.parametrize("scaling", ["none", "current", "delayed"])
def test_float8_is_exported_as_scaled_casts(scaling):
    """The formats come from the recipe, the scale rule from the setting, the bound from the
    note's own FLOAT8_AGREEMENT (measured by tests/views/test_export_torch.py)."""
    config = StepConfig(compute_dtype="float8", fp8_scaling=scaling, amax_history=5)
    note = pytorch_note(config)
    entry = recipe("float8")
    assert f"`torch.{entry.forward_format}`" in note and f"`torch.{entry.gradient_format}`" in note
    assert f'FP8_SCALING = "{scaling}"' in note and "no float8 matmul" in note
    assert ("last 5 steps" in note) == (scaling == "delayed")
    assert f"within {FLOAT8_AGREEMENT:g} relative" in note
    assert f"weights stored in {entry.forward_format}" in note


@pytest.mark.parametrize("name", [n for n, r in RECIPES.items() if r.block is not None])
def test_a_block_recipe_is_not_exported_and_the_note_says_why(name):
    note = pytorch_note(StepConfig(compute_dtype=name))
    assert f"not exported for {name}" in note and "per-block scales" in note


def test_the_autocast_policy_is_named_as_autocast_s_own_rounding():
    autocast = pytorch_note(StepConfig(precision_policy="autocast"))
    assert "your precision policy, autocast, rounds there too" in autocast
    assert "the exercise where it casts" in pytorch_note(StepConfig())
    # Its loss is float32, as PyTorch's: a scale past float16's range is no longer named.
    over = {"compute_dtype": "float16", "loss_scale": 2.0**17}
    assert "range" in pytorch_note(StepConfig(**over))
    assert "range" not in pytorch_note(StepConfig(**over, precision_policy="autocast"))


def test_the_measured_line_gives_both_losses_and_their_difference():
    note = pytorch_note(StepConfig(), page_loss=2.0, autocast_loss=2.005)
    assert "loss 2.005 after the step, the page's 2: 0.0025 apart (relative)" in note
    # Half of bfloat16's eps: how near the tests find PyTorch to the estimate.
    assert "within 0.00390625 of this estimate" in note
    overflowed = pytorch_note(StepConfig(), page_loss=float("nan"), autocast_loss=1.0)
    assert "is nan: its scaled gradients overflowed" in overflowed and "apart" not in overflowed
