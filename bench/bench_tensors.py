"""The time to analyse a safetensors file at the caps against the time to read it.

Run ``python bench/bench_tensors.py``. It writes (with the ``safetensors`` package) three files
at the caps of ``playground/core/caps.py``: float32 tensors filling the 2 MB size cap, float8
tensors filling the elements cap, and the most tensors a file may hold (small ones), and prints
for each, warm (the block recipes' programs compiled first, as the app's warm-up does), the
median of 3: the time to read it (``core.tensors.reading``: header checks and the data), the
time to analyse it (``core.tensors.report.analyse_file``: the read and every format's cast
and every block recipe's quantization of every entry), and their ratio. Target: the analysis
of a file at the caps within 3 s on 2 vCPUs (the per-request budget of ``core.settings.cost``'s
endpoints). Misses are printed, never raised.
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

from playground.core.caps import TENSOR_FILE_MAX_BYTES, TENSORS_MAX_COUNT, TENSORS_MAX_ELEMENTS
from playground.core.tensors.reading import read_tensors
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
    float32_elements = (TENSOR_FILE_MAX_BYTES - HEADER_ROOM) // 4 // 4096 * 4096
    float8_elements = min(TENSORS_MAX_ELEMENTS, TENSOR_FILE_MAX_BYTES - HEADER_ROOM) // 4096 * 4096
    many = TENSORS_MAX_COUNT * 64
    return {
        f"float32, 2 MB ({float32_elements:,} elements, 16 tensors)": save(
            gradients(16, float32_elements, np.float32)
        ),
        f"float8_e4m3fn ({float8_elements:,} elements, 16 tensors)": save(
            gradients(16, float8_elements, ml_dtypes.float8_e4m3fn)
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
        read = median_seconds(lambda c=content: read_tensors(io.BytesIO(c), len(c), "bench"))
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
