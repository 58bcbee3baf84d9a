"""Training dynamics under the block-scaled recipes: every recipe's mixed and pure runs, the
lost-update meter and the saturated share per step, against facts computed here (numpy and
ml_dtypes) rather than by the code under test."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from playground.core.data.synthetic import make_batch
from playground.core.recipes.registry import RECIPES
from playground.core.runs.train import run_dynamics
from playground.core.settings.settings import StepConfig
from playground.sections.dynamics.summary import dynamics_reading

pytestmark = pytest.mark.slow

BLOCK = [name for name, entry in RECIPES.items() if entry.block is not None]
STEPS = 4
# A small batch with a few large entries in x (2^8 times the rest), at a learning rate small
# enough for them that no run diverges.
CONFIG = StepConfig(
    n=32, d_in=40, d_out=4, lr=1e-4, steps=STEPS, outlier_share=0.01, outlier_scale=2.0**8
)
E4M3, E2M1 = ml_dtypes.float8_e4m3fn, ml_dtypes.float4_e2m1fn


def nvfp4_saturated_in_x(x: np.ndarray) -> int:
    """Entries of x that NVFP4 (blocks of 16 along each row) clips: |x| / (tensor scale x
    block scale) beyond E2M1's overflow edge 7 (6 plus half the gap above it), the block scale
    E4M3(amax_block / tensor scale / 6) (a subnormal E4M3 scale is coarse, so small blocks far
    below the tensor's largest entry overflow)."""
    rows, cols = x.shape
    padded = np.zeros((rows, math.ceil(cols / 16) * 16), np.float32)
    padded[:, :cols] = x
    blocks = padded.reshape(rows, -1, 16)
    tensor_scale = np.float32(np.abs(x).max() / np.float32(448 * 6))
    amax = np.abs(blocks).max(axis=-1, keepdims=True) / tensor_scale
    scale = np.minimum(amax / np.float32(6), 448).astype(E4M3).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(scale > 0, blocks / tensor_scale / scale, 0)
    return int(np.sum(np.abs(scaled) > 7))


@pytest.fixture(scope="module", params=BLOCK)
def run(request):
    return request.param, run_dynamics(CONFIG.replace(compute_dtype=request.param))


def test_every_block_recipe_trains_mixed_and_pure_with_the_meters(run):
    name, report = run
    for curve in (report.float32_loss, report.mixed_loss, report.pure_loss):
        assert curve.shape == (STEPS + 1,) and np.all(np.isfinite(curve))
    for share in (
        report.mixed_lost_share,
        report.pure_lost_share,
        report.mixed_saturated_share,
        report.pure_saturated_share,
    ):
        assert share.shape == (STEPS,) and np.all((share >= 0) & (share <= 1))
    # float32 masters keep the small updates that parameters stored in the element format lose.
    assert report.pure_lost_share.mean() > report.mixed_lost_share.mean()
    assert report.mixed_lost_share.max() < 0.01


def test_the_saturated_share_follows_each_recipes_scale_rule(run):
    name, report = run
    if RECIPES[name].block.scale_rule in ("round_up", "float32"):
        # amax / scale <= 448 in every block: nothing is ever clipped, outliers or not.
        assert np.all(report.mixed_saturated_share == 0)
        assert np.all(report.pure_saturated_share == 0)
        return
    # Outliers 2^16 times the rest push the other blocks' E4M3 scales into the subnormals,
    # where they are coarse; lr 0 keeps the run finite.
    config = CONFIG.replace(compute_dtype=name, outlier_scale=2.0**16, lr=0.0, steps=1)
    x, _ = make_batch(config)
    entries = config.n * config.d_in + config.d_in * config.d_out + config.n * config.d_out
    clipped = nvfp4_saturated_in_x(x)
    assert clipped > 0
    # Step 0 quantizes x, the kernel and the gradient: at least x's clipped entries count.
    assert run_dynamics(config).mixed_saturated_share[0] >= clipped / entries


def test_the_reading_names_the_block_scales_not_float8s_scaling(run):
    name, report = run
    (sentence,) = [s for s in dynamics_reading(report) if "saturated" in s]
    assert f"With {name} and its block scales" in sentence
    assert "current scaling" not in sentence
