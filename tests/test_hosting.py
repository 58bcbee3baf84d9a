"""``python app.py`` in the environment a ZeroGPU Space gives it, faked on this machine.

What ZeroGPU sets, as the ``spaces`` package (0.51.3) and Gradio read it: ``SPACES_ZERO_GPU=true``
with ``SPACES_ZERO_DEVICE_API_URL`` (the ``spaces`` package refuses to import without it), and,
as on every Space, ``SYSTEM=spaces`` and ``SPACE_ID`` (Gradio then serves as on a Space and
imports ``spaces`` for its reloader). The device API is faked by a server that records what it
is asked. The app declares no ``@spaces.GPU`` function (docs/deploy.md says why: JAX computes on
the CPU there, and a decorated function runs in a forked process, where JAX hangs), so it must
serve the page and a step without asking that API for anything: no GPU scheduled, no visitor's
GPU quota spent. docs/deploy.md also says what that means on the real platform.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app_server import AppServer
from playground import StepConfig, run_report
from playground.core.settings.settings import defaults

pytestmark = pytest.mark.slow  # its own app: about 20 s to serve, then a step's compile

SPACE_ID = "dev/mixed-precision-playground"


class DeviceAPI(BaseHTTPRequestHandler):
    """ZeroGPU's device API, faked: answers 200 to anything and records each request."""

    requests: list[tuple[str, str]] = []

    def _answer(self) -> None:
        self.requests.append((self.command, self.path))
        body = b"{}"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: object) -> None:  # the test reads ``requests`` instead
        pass


@pytest.fixture(scope="module")
def device_api() -> Iterator[tuple[str, list[tuple[str, str]]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), DeviceAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", DeviceAPI.requests
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def zero_gpu_app(device_api) -> Iterator[AppServer]:
    if importlib.util.find_spec("spaces") is None:
        pytest.fail("the `spaces` package is missing: pip install -r requirements-dev.txt")
    url, _ = device_api
    environment = {
        "SYSTEM": "spaces",
        "SPACE_ID": SPACE_ID,
        "SPACES_ZERO_GPU": "true",
        "SPACES_ZERO_DEVICE_API_URL": url,
    }
    with pytest.MonkeyPatch.context() as patch:
        for name, value in environment.items():
            patch.setenv(name, value)
        server = AppServer(log_name="zero_gpu_app.log").start()  # waits for GET / -> 200
    try:
        yield server
    finally:
        server.stop()


def test_a_step_at_the_defaults_on_zero_gpu_computes_on_the_cpu_and_asks_for_no_gpu(
    zero_gpu_app, device_api
):
    from gradio_client import Client

    _, summary, *_ = Client(zero_gpu_app.url, verbose=False).predict(api_name="/step")
    report = run_report(StepConfig())
    assert summary["config"] == defaults()
    assert summary["losses"]["mixed_new"] == report.mixed_new_loss
    assert summary["losses"]["float32_new"] == report.float32_new_loss
    _, requests = device_api
    assert requests == [], requests  # no startup report, no GPU scheduled
