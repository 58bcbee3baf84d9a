"""The time to analyse a safetensors file at the caps against the time to read it.

Run ``python bench/bench_tensors.py``. It writes (with the ``safetensors`` package) four files
at the caps of ``playground/core/caps.py``: one 4096 x 4096 bfloat16 layer (32 MB, sampled),
float32 tensors filling the size cap, float8 tensors filling it, and the most tensors a file
may hold (small ones), and prints for each, warm (the programs compiled first, as the app's
warm-up does), the median of 3: the time to read every byte of it once (the floor), the time
to analyse it (``core.tensors.report.analyse_file``: header checks, the sampled reads, the
non-finite counts over every value, every format's cast and every recipe's statistics of the
values analysed), and their ratio. Target: the analysis of a file at the caps within 3 s on 2
vCPUs (the per-request budget of ``core.settings.cost``'s endpoints). Misses are printed,
never raised.
"""

from __future__ import annotations

import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
from safetensors.numpy import save

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground.core.caps import TENSOR_FILE_MAX_BYTES, TENSORS_MAX_COUNT
from playground.core.tensors.report import analyse_file, warm_up

TARGET_SECONDS = 3.0
HEADER_ROOM = 64 * 1024  # bytes left for the header, so each file stays within the size cap
RNG = np.random.default_rng(0)


def gradients(count: int, elements: int, dtype) -> dict[str, np.ndarray]:
    """``count`` tensors of ``elements`` in all, 64 columns each, over many binades."""
    each = elements // count
    return {
        f"layers.{i}.weight.grad": (RNG.standard_normal(each) * np.exp2(RNG.uniform(-30, 4, each)))
        .astype(dtype)
        .reshape(-1, 64 if each % 64 == 0 else 1)
        for i in range(count)
    }


def files() -> dict[str, bytes]:
    room = TENSOR_FILE_MAX_BYTES - HEADER_ROOM
    layer = (RNG.standard_normal((4096, 4096), np.float32) * 0.02).astype(ml_dtypes.bfloat16)
    float32_elements = room // 4 // 2**20 * 2**20
    float8_elements = room // 2**20 * 2**20
    many = TENSORS_MAX_COUNT * 64
    return {
        "bfloat16, one 4096 x 4096 layer (32 MB)": save({"mlp.up_proj.weight": layer}),
        f"float32, {float32_elements:,} elements in 1 M tensors": save(
            gradients(float32_elements // 2**20, float32_elements, np.float32)
        ),
        f"float8_e4m3fn, {float8_elements:,} elements in 1 M tensors": save(
            gradients(float8_elements // 2**20, float8_elements, ml_dtypes.float8_e4m3fn)
        ),
        f"{TENSORS_MAX_COUNT} tensors of 64 float32": save(
            gradients(TENSORS_MAX_COUNT, many, np.float32)
        ),
    }


def median_seconds(call: Callable[[], object], repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    warm_up()
    for label, content in files().items():
        assert len(content) <= TENSOR_FILE_MAX_BYTES, (label, len(content))
        read = median_seconds(lambda c=content: io.BytesIO(c).read().count(b"\0"))
        analysed = median_seconds(lambda c=content: analyse_file(io.BytesIO(c), len(c), "bench"))
        verdict = "PASS" if analysed <= TARGET_SECONDS else "MISS"
        print(
            f"{label}: {len(content):,} bytes; read {read * 1e3:.1f} ms, analysed "
            f"{analysed:.2f} s ({analysed / read:,.0f}x the read); target <= {TARGET_SECONDS:g} s: "
            f"{verdict}",
            flush=True,
        )


if __name__ == "__main__":
    main()
