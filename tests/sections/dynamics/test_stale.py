"""Training results whose settings differ from the controls are named stale, with both values."""

from __future__ import annotations

from playground.sections.dynamics.stale import TRAIN_WORDS, stale_banner, stale_fields

COMPUTED = {"lr": "0.1", "loss_scale": "1", "compute_dtype": "bfloat16", "data": "synthetic"}


def test_matching_controls_show_no_banner_and_nothing_computed_shows_none():
    assert stale_fields(COMPUTED, dict(COMPUTED)) == []
    assert stale_banner(COMPUTED, dict(COMPUTED)) == ""
    assert stale_banner(None, COMPUTED) == ""


def test_the_banner_names_the_settings_computed_with_and_the_controls_now():
    now = COMPUTED | {"compute_dtype": "float16", "loss_scale": "1024"}
    assert stale_fields(COMPUTED, now) == ["loss_scale", "compute_dtype"]
    banner = stale_banner(COMPUTED, now)
    assert "class='stale-banner'" in banner
    # Each setting by its control's label, never by its API name nor in code quotes.
    assert "computed with loss scale = 1, compute dtype = bfloat16" in banner
    assert "the controls now say loss scale = 1024, compute dtype = float16" in banner
    assert "`" not in banner and "loss_scale" not in banner
    assert TRAIN_WORDS in banner and TRAIN_WORDS.startswith("Train")


def test_a_new_upload_is_a_difference_too():
    banner = stale_banner(COMPUTED, COMPUTED | {"data": "mine.csv"})
    assert "computed with data = synthetic" in banner and "now say data = mine.csv" in banner


def test_the_scaling_mode_is_named_by_its_controls_label():
    banner = stale_banner(COMPUTED | {"mode": "static"}, COMPUTED | {"mode": "dynamic"})
    assert "loss scaling = static" in banner and "loss scaling = dynamic" in banner
    assert "mode=" not in banner
