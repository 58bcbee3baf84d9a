"""Which stated figures change with XLA's CPU code: every caption, reading and note, recomputed
under several XLA CPU variations, each in its own process.

Run ``python bench/figure_stability.py`` from anywhere. It starts one process per variation:

    default           this machine's widest instruction set, Eigen's thread pool
    avx2, avx         XLA_FLAGS=--xla_cpu_max_isa=AVX2 (AVX): narrower vectors, so XLA's
                      reductions sum in another order, and under AVX no fused multiply-add
                      (SSE4_2 is not among them: jax 0.10's XLA cannot compile a float16
                      conversion without F16C, "Symbols not found: __extendhfsf2")
    one_thread        taskset -c 0 and --xla_cpu_multi_thread_eigen=false
                      intra_op_parallelism_threads=1
    fast_math         --xla_cpu_enable_fast_math=true (reassociation allowed)

Each process computes the texts a user reads: every lesson's sentence and condition (the step,
training, per-operation and block lessons), the step reading and each tab's note on every step
lesson's run, the reading of every training lesson's run and of the default sweep, and the
loss-scaling story as the lessons page (docs/lessons.md) states it; and, bit for bit, the final
losses behind them. The parent compares each text's numbers across the variations and prints one
line per number that differs (its figure, its position and its value under each variation), then
how many texts and numbers agree everywhere. A text that agrees everywhere is not printed.

This is a measurement, not a test: nothing is asserted. The flags are the ones jax 0.10's XLA
accepts (an unknown flag aborts the process).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

VARIATIONS = {
    "default": ([], ""),
    "avx2": ([], "--xla_cpu_max_isa=AVX2"),
    "avx": ([], "--xla_cpu_max_isa=AVX"),
    "one_thread": (
        ["taskset", "-c", "0"],
        "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    ),
    "fast_math": ([], "--xla_cpu_enable_fast_math=true"),
}
# A number as the texts write one: 1,040 / 0.0% / 7.38e-08 / 2^-16 / -3.2.
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[+-]?\d+)?%?")


def figures() -> dict[str, str]:
    """Every text, by a name that says where the page (or the docs) shows it."""
    import numpy as np

    from playground.core.lessons import DYNAMICS_LESSONS, PRECISION_LESSONS, STEP_LESSONS
    from playground.core.lessons import lesson as lesson_by_id
    from playground.core.runs.sweep import run_sweep
    from playground.core.settings.settings import StepConfig
    from playground.sections.dynamics.summary import dynamics_reading
    from playground.sections.lab.notes import activation_note, magnitude_note
    from playground.sections.lab.summary import sweep_reading
    from playground.sections.step.notes import NOTES
    from playground.sections.step.summary import reading

    texts: dict[str, str] = {}
    for lesson in (*STEP_LESSONS, *PRECISION_LESSONS):
        report = lesson.run()
        claim = lesson.claim(report)
        texts[f"{lesson.label} / caption"] = claim.sentence
        texts[f"{lesson.label} / condition"] = claim.condition
        for i, sentence in enumerate(reading(report)):
            texts[f"{lesson.label} / reading {i}"] = sentence
        for tab, note in NOTES.items():
            texts[f"{lesson.label} / note {tab}"] = note(report)
        texts[f"{lesson.label} / magnitude note"] = magnitude_note(report)
        texts[f"{lesson.label} / activation note"] = activation_note(report)
        texts[f"{lesson.label} / losses (bits)"] = " ".join(
            repr(float(v))
            for v in (
                report.mixed_initial_loss,
                report.mixed_new_loss,
                report.float32_initial_loss,
                report.float32_new_loss,
            )
        )
    for i, sentence in enumerate(sweep_reading(run_sweep(StepConfig()))):
        texts[f"default sweep / reading {i}"] = sentence
    for lesson in DYNAMICS_LESSONS:
        run = lesson.run()
        claim = lesson.claim(run)
        texts[f"{lesson.label} / caption"] = claim.sentence
        texts[f"{lesson.label} / condition"] = claim.condition
        for i, sentence in enumerate(dynamics_reading(run)):
            texts[f"{lesson.label} / reading {i}"] = sentence
        texts[f"{lesson.label} / final losses (bits)"] = " ".join(
            repr(float(np.asarray(getattr(run, f"{name}_loss"))[-1]))
            for name in ("float32", "mixed", "pure")
        )
    texts["docs/lessons.md / float16 story"] = docs_story(
        lesson_by_id("train-float16-unscaled").run()
    )
    texts["docs/using.md / NVFP4 shares"] = docs_nvfp4_shares()
    return texts


def docs_nvfp4_shares() -> str:
    """The two NVFP4 shares lost to zero that docs/using.md states: the magnitude table's (the
    gradients at the defaults) and, for an MLP at the default shape, the activation gradients'
    drawn in the chart's "lost to 0" band (to 0.1%: the page states the whole percents it lies
    between)."""
    import math

    import ml_dtypes

    from playground.core.settings.settings import StepConfig
    from playground.core.step.activation_counts import LOG2_LOW
    from playground.core.step.report import run_report
    from playground.sections.lab.tab import magnitude_table

    table = magnitude_table(run_report(StepConfig(compute_dtype="nvfp4")))
    report = run_report(StepConfig(model="mlp", compute_dtype="nvfp4"))
    edge = math.log2(float(ml_dtypes.finfo(ml_dtypes.float4_e2m1fn).smallest_subnormal) / 2)
    lost = sum(int(layer.log2_counts[: int(edge) - LOG2_LOW].sum()) for layer in report.activations)
    share = lost / sum(layer.size for layer in report.activations)
    lost_row = next(line for line in table.splitlines() if "lost to zero" in line)
    return f"{lost_row} | an MLP's activation gradients: {share:.1%} lost"


def docs_story(run) -> str:
    """The lessons page's loss-scaling story's figures, from the S = 1 float16 lesson's run."""
    import numpy as np

    from playground.core.lessons.loss_figures import final_loss, loss_path, loss_ratio

    late = slice(run.steps // 2, None)
    return (
        f"float32 goes {loss_path(run.float32_loss)}; float16 at S = 1 stalls at "
        f"{final_loss(run.mixed_loss)}, {loss_ratio(run.mixed_loss, run.float32_loss)} "
        f"float32's; {float(np.mean(run.mixed_flushed_share[late])):.0%} flushed and "
        f"{float(np.mean(run.mixed_lost_share[late])):.1%} rounded"
    )


def child() -> None:
    print(json.dumps(figures()))


def run_variation(name: str) -> dict[str, str]:
    prefix, flags = VARIATIONS[name]
    env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS="cpu")
    done = subprocess.run(
        [*prefix, sys.executable, __file__, "--child"],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise SystemExit(f"{name} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    runs = {name: run_variation(name) for name in VARIATIONS}
    names = list(runs)
    texts = list(runs["default"])
    stable_texts = stable_numbers = numbers = 0
    for name, (prefix, flags) in VARIATIONS.items():
        print(f"variation {name}: {' '.join(prefix) or '-'}, XLA_FLAGS={flags or '-'}")
    for text in texts:
        said = {name: runs[name][text] for name in names}
        found = {name: NUMBER.findall(value) for name, value in said.items()}
        count = len(found["default"])
        numbers += count
        if len(set(said.values())) == 1:
            stable_texts += 1
            stable_numbers += count
            continue
        if len({len(values) for values in found.values()}) > 1:
            print(f"DIFFERS {text}: the texts differ in their words")
            for name in names:
                print(f"    {name:>10}: {said[name]}")
            continue
        for position in range(count):
            values = [found[name][position] for name in names]
            if len(set(values)) == 1:
                stable_numbers += 1
            else:
                print(f"DIFFERS {text} #{position}: " + " | ".join(values))
    print(f"{stable_texts} of {len(texts)} texts the same under every variation")
    print(f"{stable_numbers} of {numbers} numbers the same under every variation")


if __name__ == "__main__":
    child() if "--child" in sys.argv else main()
