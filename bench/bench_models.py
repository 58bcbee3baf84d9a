"""The MLP report at 8 hidden layers of 1024, N = 4096, D_in = D_out = 1024, against its matmul
bound (issue "Beyond one layer": target at most 2.5x), and the report with each optimizer.

Run ``python bench/bench_models.py``. The bound is the report's least matmul work divided by
this machine's peak float32 matmul throughput, both measured in this run. The report runs two
steps (mixed and float32); each needs a forward pass (L + 1 matmuls of a layer), a backward pass
(weight gradients for every layer, input gradients for all but the first: 2(L + 1) - 1) and the
new loss's forward pass (L + 1): 4(L + 1) - 1 layer matmuls a step. Misses are printed, never
raised.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import peak_matmul_flops, timed  # noqa: E402  (bench/ is the script's folder)

from playground import StepConfig, run_report  # noqa: E402

LAYERS, WIDTH = 8, 1024
MLP = StepConfig(
    n=4096, d_in=1024, d_out=1024, model="mlp", hidden_layers=LAYERS, hidden_width=WIDTH
)
TARGET = 2.5


def main() -> None:
    flops = peak_matmul_flops()
    layer_matmuls = 2 * (4 * (LAYERS + 1) - 1)  # two steps, mixed and float32
    bound = layer_matmuls * 2 * 4096 * 1024 * 1024 / flops
    print(f"float32 matmul throughput at (4096, 1024, 1024): {flops / 1e9:.0f} GFLOP/s")
    for optimizer in ("sgd", "momentum", "adam"):
        config = MLP.replace(optimizer=optimizer)
        first = timed(lambda c=config: run_report(c))
        warm = timed(lambda c=config: run_report(c.replace(lr=0.05)), repeats=3)
        verdict = "PASS" if warm / bound <= TARGET else "MISS"
        print(
            f"mlp {LAYERS}x{WIDTH} N=4096 {optimizer:8s} report: first call {first:6.2f} s | warm "
            f"{warm:6.2f} s | matmul bound {bound:5.2f} s ({layer_matmuls} layer matmuls) | "
            f"warm / bound {warm / bound:4.2f} (target <= {TARGET}: {verdict})"
        )


if __name__ == "__main__":
    main()
