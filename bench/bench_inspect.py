"""``python -m playground inspect`` on a ~1 GB bfloat16 checkpoint against the time to read it.

Run ``python bench/bench_inspect.py`` (heavy: a minute or more on 2 vCPUs, and ~1 GB in a
temporary folder). It writes, with the ``safetensors`` package, a sharded checkpoint of
random-normal bfloat16 weights (std 0.02, a few outliers of 50x per tensor), four shards and
their ``model.safetensors.index.json``, then prints, once each:

    read        every tensor read with safe_open(...).get_tensor: the floor
    cast        one bfloat16 -> E4M3 cast (ml_dtypes) of the same values: one recipe's
                cheapest possible pass
    inspect     core.tensors.inspection.inspect_checkpoint (every recipe of every value),
                its values/s against the target (20 M/s: 1 B parameters in under a minute)
                and its time over the read's and the cast's

Targets are printed as PASS/MISS, never raised. The programs are compiled by a warm-up on a
small checkpoint of the same shapes first.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from playground.core.tensors.inspection import inspect_checkpoint

TARGET_VALUES_PER_SECOND = 20e6
HIDDEN, INTERMEDIATE, LAYERS, SHARDS = 2048, 5632, 11, 4
RNG = np.random.default_rng(0)


def layer(index: int) -> dict[str, np.ndarray]:
    shapes = {
        "self_attn.q_proj.weight": (HIDDEN, HIDDEN),
        "self_attn.k_proj.weight": (HIDDEN // 4, HIDDEN),
        "self_attn.v_proj.weight": (HIDDEN // 4, HIDDEN),
        "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
        "mlp.gate_proj.weight": (INTERMEDIATE, HIDDEN),
        "mlp.up_proj.weight": (INTERMEDIATE, HIDDEN),
        "mlp.down_proj.weight": (HIDDEN, INTERMEDIATE),
        "input_layernorm.weight": (HIDDEN,),
    }
    tensors = {}
    for name, shape in shapes.items():
        values = RNG.standard_normal(shape, np.float32) * 0.02
        flat = values.reshape(-1)
        flat[RNG.integers(0, flat.size, 8)] *= 50  # a few outliers
        tensors[f"model.layers.{index}.{name}"] = values.astype(ml_dtypes.bfloat16)
    return tensors


def write_checkpoint(folder: Path, layers: int) -> int:
    """A sharded checkpoint of ``layers`` layers; returns its number of values."""
    per_shard = -(-layers // SHARDS)
    weight_map, values = {}, 0
    for shard in range(SHARDS):
        tensors = {}
        for index in range(shard * per_shard, min(layers, (shard + 1) * per_shard)):
            tensors.update(layer(index))
        if not tensors:
            continue
        file = f"model-{shard + 1:05d}-of-{SHARDS:05d}.safetensors"
        save_file(tensors, folder / file)
        weight_map.update(dict.fromkeys(tensors, file))
        values += sum(t.size for t in tensors.values())
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return values


def main() -> None:
    with tempfile.TemporaryDirectory() as temporary:
        warm, big = Path(temporary, "warm"), Path(temporary, "big")
        warm.mkdir()
        big.mkdir()
        write_checkpoint(warm, 1)
        inspect_checkpoint(warm)  # compiles the block programs
        values = write_checkpoint(big, LAYERS)
        size = sum(f.stat().st_size for f in big.glob("*.safetensors"))
        files = sorted(big.glob("*.safetensors"))

        start = time.perf_counter()
        for file in files:
            with safe_open(file, framework="np") as handle:
                for name in handle.keys():  # noqa: SIM118 - a safe_open handle is no dict
                    handle.get_tensor(name)
        read = time.perf_counter() - start

        cast = 0.0
        for file in files:
            with safe_open(file, framework="np") as handle:
                for name in handle.keys():  # noqa: SIM118 - a safe_open handle is no dict
                    tensor = handle.get_tensor(name)
                    start = time.perf_counter()
                    tensor.astype(ml_dtypes.float8_e4m3fn)
                    cast += time.perf_counter() - start

        start = time.perf_counter()
        record = inspect_checkpoint(big)
        inspected = time.perf_counter() - start
    speed = values / inspected
    verdict = "PASS" if speed >= TARGET_VALUES_PER_SECOND else "MISS"
    print(f"checkpoint: {values:,} bfloat16 values, {size / 1e9:.2f} GB, {len(files)} shards")
    print(f"read (safetensors, every tensor): {read:.2f} s, {values / read / 1e6:.0f} M values/s")
    print(
        f"one bfloat16 -> E4M3 cast (ml_dtypes): {cast:.2f} s, {values / cast / 1e6:.0f} M values/s"
    )
    print(
        f"inspect (6 recipes, every value): {inspected:.2f} s, {speed / 1e6:.1f} M values/s "
        f"(its own count: {record['values_per_second'] / 1e6:.1f}); target >= "
        f"{TARGET_VALUES_PER_SECOND / 1e6:.0f} M/s: {verdict}; {inspected / read:.1f}x the read, "
        f"{inspected / cast:.1f}x one cast"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
