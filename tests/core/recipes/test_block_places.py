"""Where a block recipe's scales place a gradient's entries, against block quantizers written
here in numpy with ml_dtypes' element and scale formats (not the code under test)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from block_reference import E2M1, E4M3, block_elements

from playground.core.recipes.block_formats import BLOCK_RECIPES
from playground.core.recipes.block_places import block_places, place_counts


def _gradients(seed: int) -> list[np.ndarray]:
    """A kernel- and a bias-shaped gradient whose entries span many binades, a few exact zeros."""
    rng = np.random.default_rng(seed)
    kernel = rng.standard_normal((24, 40)) * np.exp2(rng.uniform(-30, 0, (24, 40)))
    kernel[rng.random((24, 40)) < 0.05] = 0
    bias = rng.standard_normal(40) * np.exp2(rng.uniform(-12, -2, 40))
    return [kernel.astype(np.float32), bias.astype(np.float32)]


@pytest.mark.parametrize("name", sorted(BLOCK_RECIPES))
def test_lost_and_subnormal_counts_match_an_independent_quantizer(name):
    spec = BLOCK_RECIPES[name]
    smallest_normal = float(ml_dtypes.finfo(E2M1 if name == "nvfp4" else E4M3).smallest_normal)
    for seed in (0, 1):
        gradients = _gradients(seed)
        lost = subnormal = 0
        for values in gradients:
            elements = block_elements(values, name)
            live = values.ravel() != 0
            lost += int(np.sum(live & (elements == 0)))
            subnormal += int(np.sum(live & (elements != 0) & (np.abs(elements) < smallest_normal)))
            np.testing.assert_array_equal(block_places(values, spec)[1], elements)
        counts = place_counts(gradients, gradients, spec)
        assert counts["lost to zero"] == lost and counts["subnormal"] == subnormal
        assert counts["saturated"] == 0 and counts["non-finite"] == 0
        assert lost > 0  # the spread of binades reaches below every recipe's block range


@pytest.mark.parametrize("name", sorted(BLOCK_RECIPES))
def test_a_power_of_two_loss_scale_moves_no_entry_within_its_block(name):
    spec = BLOCK_RECIPES[name]
    gradients = _gradients(2)
    scaled = [values * np.float32(2.0**10) for values in gradients]
    assert place_counts(scaled, gradients, spec) == place_counts(gradients, gradients, spec)
    units = block_places(gradients[0], spec)[0]
    np.testing.assert_allclose(block_places(scaled[0], spec)[0], units, rtol=1e-6)


def test_units_are_each_entry_over_its_blocks_scale():
    # mxfp8 at amax 1: scale 2^ceil(log2(1 / 448)) = 2^-8, so an entry's units are 256 x it.
    values = np.zeros((1, 64), np.float32)
    values[0, 0], values[0, 5], values[0, 40] = 1.0, 2.0**-20, 3.0
    units = block_places(values, BLOCK_RECIPES["mxfp8"])[0]
    assert units[0] == 256 and units[5] == 2.0**-12
    assert units[40] == 3.0 / 2.0**-7  # the second block: amax 3, scale 2^ceil(log2(3/448))
    saturated = block_places(np.array([[np.inf, 1.0]], np.float32), BLOCK_RECIPES["mxfp8"])
    assert np.isnan(saturated[0][0])
