import numpy as np

from playground import StepConfig, make_batch


def test_shapes_dtype_and_reproducibility():
    config = StepConfig(n=50, d_in=7, d_out=3, data_seed=11)
    x, y = make_batch(config)
    assert x.shape == (50, 7) and y.shape == (50, 3)
    assert x.dtype == np.float32 and y.dtype == np.float32
    again = make_batch(config.replace(lr=0.5))
    np.testing.assert_array_equal(x, again[0])
    other = make_batch(config.replace(data_seed=12))
    assert not np.array_equal(x, other[0])
    assert not x.flags.writeable


def test_scales_set_magnitudes_exactly_for_powers_of_two():
    config = StepConfig(n=2000, d_in=16, d_out=4)
    x, y = make_batch(config)
    scaled_x, scaled_y = make_batch(config.replace(input_scale=2.0**-20, target_scale=2.0**30))
    np.testing.assert_array_equal(scaled_x, x * np.float32(2.0**-20))
    np.testing.assert_array_equal(scaled_y, y * np.float32(2.0**30))
    assert 0.9 < x.std() < 1.1 and 0.9 < y.std() < 1.15


def test_y_is_a_linear_function_of_x_plus_small_noise():
    x, y = make_batch(StepConfig(n=4000, d_in=8, d_out=2, data_seed=3))
    solution, *_ = np.linalg.lstsq(x.astype(np.float64), y.astype(np.float64), rcond=None)
    residual = y - x @ solution
    # The noise has standard deviation 0.1: the teacher explains the rest.
    assert 0.09 < residual.std() < 0.11
