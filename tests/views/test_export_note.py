"""The export's PyTorch note: what it says for each loss-scaling mode, dtype and scale.

Its numeric claims (a step within the dtype's eps, float32 within FLOAT32_AGREEMENT) are measured
against PyTorch in tests/views/test_export_torch.py; here, that each setting gets its sentence.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from playground import StepConfig
from playground.views.export import SCRIPT_DTYPES
from playground.views.export_note import pytorch_note


@pytest.mark.parametrize("dtype", SCRIPT_DTYPES)
def test_the_note_names_autocast_and_the_dtype_s_eps(dtype):
    note = pytorch_note(StepConfig(compute_dtype=dtype))
    assert f'torch.autocast(device_type="cpu", dtype=torch.{dtype})' in note
    exponent = int(np.log2(ml_dtypes.finfo(np.dtype(dtype)).eps))
    assert f"eps (2^{exponent})" in note and "Not bit for bit" in note
    assert "mse_loss` in float32" in note and "1e-5" in note


def test_each_scaling_mode_says_how_grad_scaler_differs():
    none = pytorch_note(StepConfig(mode="none"))
    assert "GradScaler(enabled=False)" in none and "skips" not in none
    static = pytorch_note(StepConfig(mode="static", loss_scale=2.0**12))
    assert "S = 2^12" in static and "update(new_scale=S)" in static
    assert "skips a step with inf or NaN gradients even so" in static
    dynamic = pytorch_note(StepConfig(mode="dynamic", period=7, loss_scale=2.0**-3))
    assert "growth_interval=7" in dynamic and "no floor and no cap" in dynamic
    # The page's floor is min(1, start): the start itself when it is below 1.
    assert "never goes below 2^-3" in dynamic


def test_a_scale_beyond_float16_is_named():
    largest = float(ml_dtypes.finfo(np.float16).max)
    over = pytorch_note(StepConfig(compute_dtype="float16", loss_scale=2.0**17))
    assert f"above {largest:g}" in over and "Your S = 2^17 is above it" in over
    under = pytorch_note(StepConfig(compute_dtype="float16", loss_scale=2.0**10))
    assert "range" not in under
    # bfloat16 reaches float32's range: no such line, even for a dynamic scale.
    assert "range" not in pytorch_note(StepConfig(mode="dynamic", loss_scale=2.0**100))
    assert "range" in pytorch_note(StepConfig(compute_dtype="float16", mode="dynamic"))


def test_float8_is_not_exported_to_pytorch():
    note = pytorch_note(StepConfig(compute_dtype="float8"))
    assert "not exported for float8" in note and "autocast" in note


def test_the_measured_line_gives_both_losses_and_their_difference():
    note = pytorch_note(StepConfig(), page_loss=2.0, autocast_loss=2.005)
    assert "loss 2.005 after the step, the page's 2: 0.0025 apart (relative)" in note
    # Half of bfloat16's eps: how near the tests find PyTorch to the estimate.
    assert "within 0.00390625 of this estimate" in note
    overflowed = pytorch_note(StepConfig(), page_loss=float("nan"), autocast_loss=1.0)
    assert "is nan: its scaled gradients overflowed" in overflowed and "apart" not in overflowed
