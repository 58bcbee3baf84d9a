"""``app.py`` with every event's handler timed and its answer sized: the server half of
bench/profile_commit.py (which launches it). Each processed event prints one line
``PROFILE {json}`` with the event's fn index, its handler's name, the seconds in
``Blocks.process_api`` and the bytes of its answer's data as JSON.
"""

from __future__ import annotations

import json
import runpy
import sys
import time
from pathlib import Path

import gradio.blocks

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

_process_api = gradio.blocks.Blocks.process_api


async def timed_process_api(self, block_fn, inputs, *args, **kwargs):
    start = time.perf_counter()
    result = await _process_api(self, block_fn, inputs, *args, **kwargs)
    seconds = time.perf_counter() - start
    fn = block_fn if not isinstance(block_fn, int) else self.fns[block_fn]
    data = result.get("data", []) if isinstance(result, dict) else []
    sizes = []
    for value in data:
        try:
            sizes.append(len(json.dumps(value, default=str)))
        except (TypeError, ValueError):
            sizes.append(-1)
    line = {
        "fn": fn._id,
        "name": getattr(fn.fn, "__name__", str(fn.fn)),
        "s": round(seconds, 5),
        "outputs": len(data),
        "bytes": sum(sizes),
        "sizes": sizes,
        "input_bytes": len(json.dumps(inputs, default=str)),
        **_PARTS.pop(fn._id, {}),
    }
    print("PROFILE " + json.dumps(line), flush=True)
    return result


gradio.blocks.Blocks.process_api = timed_process_api
_PARTS: dict = {}


def _timed(name, method):
    async def timed(self, block_fn, *args, **kwargs):
        start = time.perf_counter()
        try:
            return await method(self, block_fn, *args, **kwargs)
        finally:
            fn = block_fn if not isinstance(block_fn, int) else self.fns[block_fn]
            key = getattr(fn, "_id", None)
            _PARTS.setdefault(key, {})[name] = round(time.perf_counter() - start, 5)

    return timed


gradio.blocks.Blocks.call_function = _timed("call", gradio.blocks.Blocks.call_function)
from playground.ui.gradio_internals import blocks as event_blocks  # noqa: E402

event_blocks.EventBlocks.postprocess_data = _timed(
    "postprocess", event_blocks.EventBlocks.postprocess_data
)
sys.argv = [str(REPO_ROOT / "app.py")]
runpy.run_path(str(REPO_ROOT / "app.py"), run_name="__main__")
