"""The transformer block's /step (``model=transformer``): its warm call against its matmul bound
(the MLP's target, at most 2.5x: ``bench_models.py``), and its first call against the cost
model's price of the compile (``core.settings.compile_cost``, as ``bench_compile.py`` prints it).

Run ``python bench/bench_transformer.py``. The /step goes through the page's own step endpoint
(``ui.warm_up.run``: the report, views and charts). The bound is the report's least matmul work
divided by this machine's peak float32 matmul throughput, both measured in this run. Per batch
row, with F the dense matmuls' multiply-adds (the Layout's fan_in x fan_out sum) and A = 2 T d
the attention's two contractions (scores and values, each T x d per token, as computed: the
causal mask is applied to a full T x T product), one step is a forward pass (F + A), a backward
pass (every dense layer's weight gradient, every input gradient but embed's: 2F - D_in d; the
two gradients of each attention contraction: 2A) and the new loss's forward pass (F + A); the
report runs two steps (mixed and float32). The first-call overhead is the first call's time
minus a warm call's, against ``compile_cost.first_call_seconds``
(``covers`` when the price is at least the overhead, ``UNDER`` when it is below). Every
configuration has a batch size of its own, so its first call compiles; misses are printed,
never raised.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import peak_matmul_flops, timed  # noqa: E402  (bench/ is the script's folder)

from playground.core.model.models import MODELS  # noqa: E402
from playground.core.settings import compile_cost  # noqa: E402
from playground.core.settings.settings import StepConfig  # noqa: E402
from playground.ui.warm_up import run as call  # noqa: E402  (the step via its endpoint)

TARGET = 2.5
# (label, settings): the defaults' block, and a larger one where the matmuls dominate.
CONFIGS = (
    ("default", StepConfig(model="transformer", n=255)),
    (
        "medium",
        StepConfig(
            model="transformer",
            n=1023,
            d_in=256,
            d_out=256,
            hidden_width=256,
            heads=8,
            seq_len=64,
        ),
    ),
    (
        "medium adam mxfp8",
        StepConfig(
            model="transformer",
            n=1022,
            d_in=256,
            d_out=256,
            hidden_width=256,
            heads=8,
            seq_len=64,
            optimizer="adam",
            compute_dtype="mxfp8",
        ),
    ),
    # The largest block the page takes at d_model 512 (D_in = D_out = 512; N 2048, T 64):
    # its matmuls dominate, as the MLP bench's do (bench_models.py).
    (
        "large",
        StepConfig(
            model="transformer",
            n=2048,
            d_in=512,
            d_out=512,
            hidden_width=512,
            heads=8,
            seq_len=64,
        ),
    ),
)


def matmul_flops(config: StepConfig) -> float:
    """The report's least matmul FLOPs (see the module rule)."""
    choice = config.model_choice
    layout = MODELS[choice.name].layout(choice, config.d_in, config.d_out)
    dense = sum(fan_in * fan_out for fan_in, fan_out in layout.dense)
    attention = 2 * choice.seq_len * choice.hidden_width
    step = (dense + attention) + (2 * dense - config.d_in * choice.hidden_width + 2 * attention)
    step += dense + attention
    return 2 * 2 * config.n * step  # two steps, 2 FLOPs a multiply-add


def main() -> None:
    print(f"jax {jax.__version__} | backend {jax.default_backend()} | cpu_count {os.cpu_count()}")
    print(f"load average (1, 5, 15 min): {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    call("step", StepConfig(n=8, d_in=8, d_out=8))  # what every shape shares
    flops = peak_matmul_flops()
    print(f"float32 matmul throughput at (4096, 1024, 1024): {flops / 1e9:.0f} GFLOP/s")
    for label, config in CONFIGS:
        first = timed(lambda c=config: call("step", c))
        warm = timed(lambda c=config: call("step", c.replace(lr=0.05)), repeats=3)
        bound = matmul_flops(config) / flops
        verdict = "PASS" if warm / bound <= TARGET else "MISS"
        model = compile_cost.first_call_seconds(config, "step")
        covers = "covers" if model >= first - warm else "UNDER"
        c = config.model_choice
        shape = (
            f"transformer d={c.hidden_width} T={c.seq_len} h={c.heads} N={config.n} "
            f"{config.compute_dtype} {config.optimizer}"
        )
        print(
            f"{label:>17} {shape} /step: warm {warm * 1e3:7.1f} ms | matmul bound "
            f"{bound * 1e3:6.2f} ms | warm / bound {warm / bound:6.1f} (target <= {TARGET}: "
            f"{verdict}) | first {first:5.2f} s, overhead {first - warm:5.2f} s | price "
            f"{model:5.2f} s {covers}"
        )


if __name__ == "__main__":
    main()
