"""/dynamics with ``pure_rounding`` as a keyword, through gradio_client on the launched app."""

from __future__ import annotations

from pathlib import Path


def test_dynamics_takes_pure_rounding_by_keyword(client):
    # lr 0.002 at 32 x 8 x 4: rounding to nearest loses most pure bfloat16 updates (see
    # tests/sections/dynamics/test_pure_rounding.py); Kahan's buffer keeps them.
    reading, summary, *_plots, files = client.predict(
        n=32,
        d_in=8,
        d_out=4,
        lr=0.002,
        steps=40,
        pure_rounding="kahan",
        downloads=True,
        api_name="/dynamics",
    )
    assert summary["pure_rounding"] == summary["config"]["pure_rounding"] == "kahan"
    assert summary["config"]["steps"] == 40 and summary["config"]["lr"] == 0.002
    assert summary["mean_lost_share"]["pure"] < 0.05  # nearest: most of them
    assert "Kahan summation" in reading
    assert all("pure-kahan" in Path(path).name for path in files)
