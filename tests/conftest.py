import os
import pathlib
import sys

# The tests import the package from the checkout, without an install step.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

# The launched-app fixtures (app_url, client), shared by the API and browser tests.
pytest_plugins = ["fixtures_app"]

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# In CI (CI=true) hypothesis draws the same examples on every run and machine, so a green CI
# means green on the next machine; no deadline, since a first call compiles. Loaded here, before
# the test modules, so their own @settings inherit it.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

APP_TESTS = pathlib.Path(__file__).resolve().parent / "app"
COMPILATION_CACHE_BYTES = 2**30


def pytest_configure(config):
    """Compiling XLA programs is most of the suite's time, and the same programs are compiled in
    each xdist worker, in the launched app and in the scripts the tests run: every one of these
    processes shares one JAX compilation cache on disk, in pytest's cache directory (cleared by
    ``--cache-clear``), so a program compiles once per run and, on a later run, not at all.
    An executable read back is the one compiled from the same program and flags, so no number
    changes. A size limit turns on the cache's file lock, which the concurrent processes need.
    Set before any test module imports jax; a JAX_COMPILATION_CACHE_DIR already set is kept."""
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or getattr(config, "cache", None) is None:
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(config.cache.mkdir("jax-compilation"))
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # eager ops' programs too
    os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(COMPILATION_CACHE_BYTES)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist (``-n 2 --dist loadgroup``, set in pyproject.toml) every test of
    tests/app runs in one worker, so one launched app and one Chromium serve them all, and the
    load and fairness tests never share the CPU with a second app; the numerics tests run in the
    other worker meanwhile. Without xdist the mark does nothing."""
    for item in items:
        if APP_TESTS in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.xdist_group("app"))
