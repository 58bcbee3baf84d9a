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
    memory      the peak resident memory of the same pass in a process of its own, against
                the same pass over one layer (the programs, the runtime, one tensor) and the
                imports alone: what grows with the checkpoint, in multiples of the largest
                tensor (target: at most MEMORY_MULTIPLE: one tensor at a time)

Targets are printed as PASS/MISS, never raised. The programs are compiled by a warm-up on a
small checkpoint of the same shapes first.
"""

from __future__ import annotations

import json
import os
import subprocess
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
MEMORY_MULTIPLE = 4  # peak memory over the imports, in largest tensors: a small multiple
HIDDEN, INTERMEDIATE, LAYERS, SHARDS = 2048, 5632, 11, 4
RNG = np.random.default_rng(0)
SHAPES = {
    "self_attn.q_proj.weight": (HIDDEN, HIDDEN),
    "self_attn.k_proj.weight": (HIDDEN // 4, HIDDEN),
    "self_attn.v_proj.weight": (HIDDEN // 4, HIDDEN),
    "self_attn.o_proj.weight": (HIDDEN, HIDDEN),
    "mlp.gate_proj.weight": (INTERMEDIATE, HIDDEN),
    "mlp.up_proj.weight": (INTERMEDIATE, HIDDEN),
    "mlp.down_proj.weight": (HIDDEN, INTERMEDIATE),
    "input_layernorm.weight": (HIDDEN,),
}


def layer(index: int) -> dict[str, np.ndarray]:
    tensors = {}
    for name, shape in SHAPES.items():
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
        peak, one_layer, floor = peak_memory(big), peak_memory(warm), peak_memory(None)
        largest = max(
            np.dtype(ml_dtypes.bfloat16).itemsize * int(np.prod(shape)) for shape in SHAPES.values()
        )
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
    growth = peak - one_layer
    memory_verdict = "PASS" if growth <= MEMORY_MULTIPLE * largest else "MISS"
    print(
        f"peak memory (the command in its own process): {peak / 2**20:,.0f} MB for {LAYERS} "
        f"layers, {one_layer / 2**20:,.0f} MB for 1 layer of the same shapes, "
        f"{floor / 2**20:,.0f} MB for the imports alone; growth with the checkpoint "
        f"{growth / 2**20:,.0f} MB = {growth / largest:.1f}x the largest tensor "
        f"({largest / 2**20:.0f} MB); target <= {MEMORY_MULTIPLE}x: {memory_verdict}"
    )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


def peak_memory(folder: Path | None) -> int:
    """The peak resident memory, in bytes, of ``python -m playground inspect folder`` run in a
    process of its own (None: the same imports and nothing inspected: the floor)."""
    # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec.
    code = (
        "import sys\n"
        "from playground.core.tensors.inspection import inspect_checkpoint\n"
        "if sys.argv[1]: inspect_checkpoint(sys.argv[1])\n"
        "print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1])\n"
    )
    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-c", code, str(folder or "")],
        capture_output=True,
        text=True,
        check=True,
        cwd=root,
    )
    return int(result.stdout.split()[-1]) * 1024  # VmHWM is in kB


if __name__ == "__main__":
    main()
