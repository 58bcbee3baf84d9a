import math

import pytest

from playground.core.settings.settings import (
    FLOAT32_MAX,
    SEED_MAX,
    ConfigError,
    StepConfig,
    check_setting,
    defaults,
    settings,
)


def test_defaults_are_valid_and_come_from_the_table():
    config = StepConfig()
    assert config.to_dict() == defaults()
    assert config.compute_dtype == "bfloat16"


def test_whole_floats_become_ints_for_integer_fields():
    config = StepConfig(n=32.0, d_in=8.0, d_out=4.0, model_seed=float(SEED_MAX))
    assert (config.n, config.d_in, config.d_out) == (32, 8, 4)
    assert isinstance(config.n, int) and config.model_seed == SEED_MAX


@pytest.mark.parametrize(
    "field, value",
    [
        ("model_seed", -1),
        ("model_seed", 2.5),
        ("model_seed", SEED_MAX + 1),
        ("data_seed", "7"),
        ("data_seed", True),
        ("n", 0),
        ("n", 4097),
        ("d_in", 0),
        ("d_in", 1025),
        ("d_out", -3),
        ("d_out", 10**400),
        ("lr", -0.1),
        ("lr", math.nan),
        ("lr", math.inf),
        ("loss_scale", 0.0),
        ("loss_scale", -1.0),
        ("loss_scale", math.nan),
        ("loss_scale", math.inf),
        ("loss_scale", 1e39),
        ("input_scale", 0.0),
        ("target_scale", 2.0**65),
        ("compute_dtype", "float64"),
    ],
)
def test_bad_values_name_the_field_and_its_range(field, value):
    with pytest.raises(ConfigError) as caught:
        StepConfig(**{field: value})
    error = caught.value
    assert isinstance(error, ValueError)
    assert error.field == field
    message = str(error)
    assert message.startswith(field)
    bounds = settings()[field]
    if bounds.choices:
        assert all(choice in message for choice in bounds.choices)
    else:
        assert "[" in message and "]" in message


def test_range_ends_are_allowed():
    for name, bounds in settings().items():
        if bounds.choices:
            continue
        for end in (bounds.low, bounds.high):
            assert check_setting(name, end) == end


def test_replace_checks_the_changed_setting_and_leaves_the_original_as_it_was():
    config = StepConfig(n=32, d_in=8, d_out=4)
    assert config.replace(n=3.0).n == 3  # checked and coerced like a new config
    with pytest.raises(ConfigError) as caught:
        config.replace(d_out=0)
    assert caught.value.field == "d_out"
    assert config.shape == (32, 8, 4)  # a run's settings never change under it


def test_lr_cap_is_float32_max():
    assert StepConfig(lr=FLOAT32_MAX).lr == FLOAT32_MAX
