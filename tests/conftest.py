"""The suite's two tiers, its shared compilation cache and its split over two workers.

``python -m pytest`` runs the quick tier: every test but those marked ``slow``, with each
hypothesis test at a tenth of its examples (``helpers.examples``). ``python -m pytest --full``
runs everything (CI's ``.ci/run``). A test is ``slow`` when it repeats what a quick test already
touches at a larger size: the browser walks, the fuzz and load tests, the PyTorch peers, every
recipe x model x endpoint combination.
"""

import os
import pathlib
import sys

# The tests import the package from the checkout, without an install step.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

# The launched-app fixtures (app_url, client), shared by the API and browser tests, and the
# shared helpers' fixtures (tests/helpers.py).
pytest_plugins = ["fixtures_app", "helpers"]

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from helpers import FULL_TIER_ENV  # noqa: E402

# In CI (CI=true) hypothesis draws the same examples on every run and machine, so a green CI
# means green on the next machine; no deadline, since a first call compiles. Loaded here, before
# the test modules, so their own @settings inherit it.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
# The quick tier draws a tenth of hypothesis's default examples (helpers.examples scales the
# tests that set their own count); the full tier draws them all.
QUICK_EXAMPLES = 10

APP_TESTS = pathlib.Path(__file__).resolve().parent / "app"
COMPILATION_CACHE_BYTES = 2**30


def pytest_addoption(parser):
    parser.addoption(
        "--full",
        action="store_true",
        help="run the full tier: the tests marked slow too, and hypothesis at full size",
    )


def pytest_configure(config):
    """Compiling XLA programs is most of the suite's time, and the same programs are compiled in
    each xdist worker, in the launched app and in the scripts the tests run: every one of these
    processes shares one JAX compilation cache on disk, in pytest's cache directory (cleared by
    ``--cache-clear``), so a program compiles once per run and, on a later run, not at all.
    An executable read back is the one compiled from the same program and flags, so no number
    changes. A size limit turns on the cache's file lock, which the concurrent processes need.
    Set before any test module imports jax; a JAX_COMPILATION_CACHE_DIR already set is kept.

    Also registers the ``slow`` marker and tells the test modules (through FULL_TIER_ENV, which
    xdist's workers inherit) whether this is the full tier."""
    config.addinivalue_line("markers", "slow: in the full tier only (python -m pytest --full)")
    if config.getoption("full"):
        os.environ[FULL_TIER_ENV] = "1"
    else:
        settings.register_profile("quick", settings(max_examples=QUICK_EXAMPLES))
        settings.load_profile("quick")
    if os.environ.get("JAX_COMPILATION_CACHE_DIR") or getattr(config, "cache", None) is None:
        return
    os.environ["JAX_COMPILATION_CACHE_DIR"] = str(config.cache.mkdir("jax-compilation"))
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"  # eager ops' programs too
    os.environ["JAX_COMPILATION_CACHE_MAX_SIZE"] = str(COMPILATION_CACHE_BYTES)


# tests/app modules that run in the other worker, beside the shared app's group: test_disk and
# test_fair_share launch an app of their own (test_disk its own Gradio folder and caps,
# test_fair_share a trusted proxy; its time bounds scale with the same calls' time alone, so a
# busy machine does not fail them), and that worker launches an app and a Chromium of its own
# for the others (the lab's browser tests, the API fuzz, which times nothing). Without them the
# shared app's group is over half of the suite's time (on a fresh clone it ran for minutes
# after the other worker had finished), so the two workers finish together. The load test
# test_public_space stays in the shared app's group: it loads the shared app itself.
BESIDE_THE_SHARED_APP = (
    "test_disk.py",
    "test_api_fuzz.py",
    "test_lab_browser.py",
    "test_fair_share.py",
)


# Modules that read the same results, cached once per process, run in one worker: the browser's
# plotly tests draw the figures the plotly tests compute (app_figures.all_figures, 2-5 s).
SHARED_RESULTS = {"views/test_plotly_browser": "views/test_plotly"}


def _group(item) -> str:
    """The xdist group of a test: "app" for the tests that drive the shared app or Chromium,
    else its module (or the module whose results it shares, SHARED_RESULTS), so a module's shared
    fixtures and caches are computed in one worker."""
    path = pathlib.Path(str(item.fspath))
    if APP_TESTS in path.parents and path.name not in BESIDE_THE_SHARED_APP:
        return "app"
    if APP_TESTS.parent not in path.parents:  # a doctest of a module outside tests/
        return path.with_suffix("").as_posix()
    module = path.relative_to(APP_TESTS.parent).with_suffix("").as_posix()
    return SHARED_RESULTS.get(module, module)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Leaves out the tests marked ``slow`` unless ``--full`` is given, then orders the rest.

    Under pytest-xdist (``-n 2 --dist loadgroup --no-loadscope-reorder``, set in pyproject.toml)
    a group runs whole in one worker, and the groups start in the order of their first test: the
    shared app's group first, as it is the longest (its worker launches one app and one
    Chromium for all its tests), then the other app and browser tests (slow per test), then the
    other groups, the largest first, so the worker that finishes early takes the small ones that
    are left. The sort is stable: within a module the order stays. Without xdist the marks do
    nothing (the tests run in any order)."""
    if not config.getoption("full"):
        slow = [item for item in items if item.get_closest_marker("slow")]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if not item.get_closest_marker("slow")]
    groups = {id(item): _group(item) for item in items}
    sizes: dict[str, int] = {}
    for group in groups.values():
        sizes[group] = sizes.get(group, 0) + 1
    first = {group: index for index, group in enumerate(dict.fromkeys(groups.values()))}

    def start(item) -> tuple[bool, bool, int, int]:
        group = groups[id(item)]
        return group != "app", not group.startswith("app/"), -sizes[group], first[group]

    items.sort(key=start)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
