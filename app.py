"""Entry point for `python app.py` and for Hugging Face Spaces.

Serves on 127.0.0.1:7860 unless GRADIO_SERVER_NAME / GRADIO_SERVER_PORT say otherwise
(Spaces sets them).
"""

import ctypes
import os

# Rule: a long-running server uses at most MALLOC_ARENAS of glibc's malloc arenas. By default
# glibc gives threads that allocate at once their own arenas (up to 8 per core); JAX's and
# Gradio's worker threads then fragment them and the server's memory creeps without a leak
# (bench/bench_load.py, 6,000 mixed calls: +16 MB over the second half with the default, +3 MB
# with two). Set before any thread starts; an operator's MALLOC_ARENA_MAX wins; no-op off glibc.
MALLOC_ARENAS = 2
M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


def limit_malloc_arenas() -> bool:
    """Cap glibc's malloc arenas (see the rule above); True when glibc took the setting."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, MALLOC_ARENAS))


limit_malloc_arenas()

from playground.core.step import compile_cache  # noqa: E402

compile_cache.enable()  # before any program compiles, so every one is saved and read back

from playground.ui import warm_up  # noqa: E402
from playground.ui.launch import launch_kwargs, queue_kwargs  # noqa: E402
from playground.ui.page import build_demo  # noqa: E402

demo = build_demo()

if __name__ == "__main__":
    # The page's own step before serving; the rest while serving, visitors first.
    warm_up.start()
    demo.queue(**queue_kwargs()).launch(**launch_kwargs(demo))
