"""The transformer block's lessons (playground.core.lessons.transformer) against an independent
computation: the block's forward pass up to the attention scores and the gated product,
written here in numpy float64 from the lesson's own initial parameters and batch (the spec's
formulas, not the model's code), then rounded to float16, bfloat16 and float32 (ml_dtypes) and
quantized to float8_e4m3fn per tensor and in MX blocks of 32 here."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest

from playground.core.data.synthetic import make_batch
from playground.core.lessons import LESSONS, TRANSFORMER_LESSONS, lesson
from playground.core.lessons.transformer import block_tensors
from playground.sections.step.summary import summarize
from playground.sections.step.tab import page_texts
from playground.ui.examples import LESSONS as BUTTONS

FLOAT16_MAX = 65504.0
E4M3_MAX, E4M3_MIN_NORMAL = 448.0, 2.0**-6


@functools.cache
def run(lesson_id: str):
    return lesson(lesson_id).run()


def _forward(report, norm: bool = False) -> dict[str, np.ndarray]:
    """x, the causal attention scores (masked entries 0) and m = silu(g) * u in float64, from
    ``report``'s initial parameters and batch (spec: core/model/transformer.py's table), with
    the layer norms (scale 1, bias 0, eps 1e-6, as initialized) when ``norm``."""
    config = report.config
    p = {name: r.before.astype(np.float64) for name, r in report.params.items()}

    def linear(name, a):
        return a @ p[f"{name}.kernel"] + p[f"{name}.bias"]

    def layer_norm(a):
        mean = a.mean(-1, keepdims=True)
        return (a - mean) / np.sqrt(((a - mean) ** 2).mean(-1, keepdims=True) + 1e-6)

    x = make_batch(config)[0].astype(np.float64)
    n, t, heads, d = x.shape[0], config.seq_len, config.heads, config.hidden_width
    h = linear("embed", x)
    a = layer_norm(h) if norm else h

    def split(v):
        v = np.pad(v, ((0, -n % t), (0, 0)))
        return v.reshape(-1, t, heads, d // heads)

    q, k, v = (split(linear(f"attention.{name}", a)) for name in ("query", "key", "value"))
    scores = np.einsum("sqhd,skhd->shqk", q / np.sqrt(d // heads), k)
    causal = np.tril(np.ones((t, t), bool))
    weights = np.exp(
        np.where(causal, scores, -np.inf) - np.where(causal, scores, -np.inf).max(-1, keepdims=True)
    )
    weights /= weights.sum(-1, keepdims=True)
    o = np.einsum("shqk,skhd->sqhd", weights, v).reshape(-1, d)[:n]
    h = h + linear("attention.out", o)
    b = layer_norm(h) if norm else h
    g, u = linear("mlp.gate", b), linear("mlp.up", b)
    m = g / (1 + np.exp(-g)) * u
    return {"x": x, "scores": np.where(causal, scores, 0.0), "q": q, "k": k, "m": m}


def _e4m3(values: np.ndarray) -> np.ndarray:
    """``values`` rounded to float8_e4m3fn (ml_dtypes), saturated at 448 as float8 recipes do."""
    return np.clip(values, -E4M3_MAX, E4M3_MAX).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)


def per_tensor_float8(values: np.ndarray) -> np.ndarray:
    """Current scaling: one scale s = 448 / amax for the tensor; the stored elements."""
    return _e4m3(values * (E4M3_MAX / np.max(np.abs(values))))


def mx_blocks(values: np.ndarray, block: int = 32) -> np.ndarray:
    """MXFP8 along the rows (the contraction of a matmul's input): one power-of-two scale per
    32 values, 2^ceil(log2(amax / 448)) (the round-up rule: no element past 448); the stored
    elements."""
    rows, cols = values.shape
    tiles = np.pad(values, ((0, 0), (0, -cols % block))).reshape(rows, -1, block)
    amax = np.max(np.abs(tiles), axis=-1, keepdims=True)
    scale = 2.0 ** np.ceil(np.log2(np.where(amax > 0, amax, 1.0) / E4M3_MAX))
    return _e4m3(tiles / scale)


def shares(values: np.ndarray, stored: np.ndarray) -> dict[str, float]:
    """Of ``values``' nonzero entries: the share stored as 0, and as normal numbers."""
    live = values.reshape(stored.shape) != 0
    stored = np.abs(stored[live])
    return {
        "flushed": float(np.mean(stored == 0)),
        "normal": float(np.mean(stored >= E4M3_MIN_NORMAL)),
    }


def test_the_transformer_lessons_are_registered_buttons_with_the_contracts_label():
    ids = [each.id for each in TRANSFORMER_LESSONS]
    assert ids == ["attention-overflow", "bfloat16-attention", "swiglu-outlier"]
    assert all(LESSONS[name] is each for name, each in zip(ids, TRANSFORMER_LESSONS, strict=True))
    assert all(each in BUTTONS for each in TRANSFORMER_LESSONS)
    # CONTRACTS.md: a lesson about float16 attention has "attention" in its button's label.
    assert "attention" in LESSONS["attention-overflow"].label
    assert LESSONS["attention-overflow"].config().model == "transformer"


@pytest.mark.slow
@pytest.mark.parametrize("lesson_id", [each.id for each in TRANSFORMER_LESSONS])
def test_every_transformer_lesson_holds(lesson_id):
    claim = lesson(lesson_id).claim(run(lesson_id))
    assert claim.holds, claim.condition


@pytest.mark.slow
@pytest.mark.parametrize("lesson_id", [each.id for each in TRANSFORMER_LESSONS])
def test_every_transformer_lessons_float32_step_lowers_a_finite_loss(lesson_id):
    # The float32 twin is what the page reads the mixed step against: in a chapter about the
    # block's casts and quantization, its step must not itself diverge (a loss near 1e7-1e10
    # needs the lessons' small lr).
    report = run(lesson_id)
    assert np.isfinite(report.float32_new_loss), report.float32_new_loss
    assert report.float32_new_loss < report.float32_initial_loss


@pytest.mark.slow
def test_float16_scores_pass_65504_only_without_the_norms_and_float32_holds_them():
    report = run("attention-overflow")
    forward = _forward(report)
    # q and k themselves fit float16; their scaled dot products do not.
    assert max(np.abs(forward["q"]).max(), np.abs(forward["k"]).max()) < FLOAT16_MAX
    q16 = (forward["q"] / np.sqrt(forward["q"].shape[-1])).astype(np.float16)
    k16 = forward["k"].astype(np.float16)
    scores16 = np.einsum("sqhd,skhd->shqk", q16.astype(np.float32), k16.astype(np.float32))
    causal = np.tril(np.ones(scores16.shape[-2:], bool))
    assert np.isinf(scores16.astype(np.float16)[..., causal]).any()  # rounded to float16: inf
    assert np.isfinite(scores16).all() and np.abs(scores16).max() > FLOAT16_MAX  # float32: fine
    largest = np.abs(forward["scores"]).max()
    ours = block_tensors(report.config)["scores"]
    np.testing.assert_allclose(ours, forward["scores"], rtol=1e-3, atol=1e-4 * largest)
    assert f"reach {largest:.4g}" in lesson("attention-overflow").claim(report).sentence
    # The page names the scores first under exercise; under autocast they are float32 and finite.
    assert report.first_nonfinite["forward"] == "attention scores"
    rows = {op.name: op for op in report.operations}
    assert all(rows[name].forward_finite for name in ("embed", "attention.query", "attention.key"))
    # With the block's pre-norms (norm=layernorm, the same linear weights) the scores stay small.
    normed = _forward(report, norm=True)
    assert np.abs(normed["scores"]).max() < 1e-3 * FLOAT16_MAX


@pytest.mark.slow
def test_the_page_reads_the_float16_attention_run_naming_the_scores_and_why():
    # The reading, the summary and the headline of the lesson's run (the route's chapter shows
    # them): the causes name the scores as the forward pass's first overflow, with the reason
    # built from float16's largest value, and never blame the loss scale for it.
    report = run("attention-overflow")
    summary = summarize(report)
    failure = summary["forward_failure"]
    assert failure["operation"] == "attention scores" and failure["kind"] == "attention"
    assert failure["dtype"] == "float16" and f"past {FLOAT16_MAX:.6g}" in failure["why"]
    assert "forward_overflow" in summary["causes"], summary["causes"]
    assert "scaled_gradient_overflow" not in summary["causes"], summary["causes"]
    sentence = next(s for s in summary["reading"] if "forward pass overflows" in s)
    assert f"first appears in attention scores, {failure['why']}" in sentence, sentence
    headline, reading, _ = page_texts(report, None)
    assert "attention scores" in reading
    # The headline shows the failed float16 step's loss as nan beside float32's finite one.
    assert "<span id='mixed-new-loss'>**nan**</span>" in headline, headline
    assert f"**{report.float32_new_loss:.7g}**" in headline, headline


@pytest.mark.slow
def test_bfloat16_holds_the_same_scores_and_the_step_stays_finite():
    report = run("bfloat16-attention")
    scores = _forward(report)["scores"]
    assert np.abs(scores).max() > FLOAT16_MAX
    rounded = scores.astype(ml_dtypes.bfloat16).astype(np.float64)
    assert np.isfinite(rounded).all()
    np.testing.assert_allclose(rounded, scores, rtol=2.0**-8, atol=0)
    assert report.first_nonfinite == {"forward": None, "backward": None}
    # The step itself is sound (a small lr for a loss near 1e10): bfloat16 follows float32.
    assert report.float32_new_loss < report.float32_initial_loss / 2
    np.testing.assert_allclose(report.mixed_new_loss, report.float32_new_loss, rtol=5e-2)


@pytest.mark.slow
def test_the_gated_product_squares_the_outlier_per_tensor_float8_flushes_it_mxfp8_keeps_it():
    report = run("swiglu-outlier")
    forward = _forward(report)
    x, m = forward["x"], forward["m"]
    x_kept = shares(x, per_tensor_float8(x))
    m_per_tensor = shares(m, per_tensor_float8(m))
    m_blocks = shares(m, mx_blocks(m))
    assert x_kept["normal"] >= 0.9  # x itself survives one scale per tensor
    assert m_per_tensor["flushed"] > 0.5  # m does not: most of it becomes 0
    assert m_blocks["flushed"] < 0.02 and m_blocks["normal"] >= 0.9
    # The lesson says the same numbers (its m is float32, this one float64).
    sentence = lesson("swiglu-outlier").claim(report).sentence
    said = float(sentence.split("float8 (current scaling) flushes ")[1].split("%")[0]) / 100
    assert abs(said - m_per_tensor["flushed"]) < 5e-3
    np.testing.assert_allclose(
        block_tensors(report.config)["m"], m, rtol=1e-3, atol=1e-3 * np.abs(m).max()
    )
