"""Run ``python app.py`` as a real server process on a free local port.

Used by the API and browser tests (through the fixtures in ``fixtures_app``) and by
``bench/bench_app.py``::

    with AppServer() as server:
        Client(server.url)

The server's stdout and stderr go to a log file under ``tests/artifacts/``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
START_TIMEOUT = 90.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AppServer:
    """``python app.py`` (or another ``script``) on 127.0.0.1:<free port>, with analytics and
    sharing off."""

    def __init__(
        self,
        log_name: str = "app_server.log",
        timeout: float = START_TIMEOUT,
        script: str = "app.py",
    ):
        self.script = script  # relative to the repository's root
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log_path = ARTIFACTS / log_name
        self.timeout = timeout
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None  # time.perf_counter() just before Popen
        self._log = None

    def start(self) -> AppServer:
        """Start the process and block until GET / answers; raise if it never does."""
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        env = {
            **os.environ,
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(self.port),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "PYTHONUNBUFFERED": "1",
            # The start-up warm-up (ui.warm_up) competes with the tests' browsers for the 2
            # vCPUs; test_warm_up.py runs it, and the benches turn it on.
            "PLAYGROUND_WARM_UP": os.environ.get("PLAYGROUND_WARM_UP", "0"),
        }
        self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self.started_at = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, self.script],
            cwd=REPO_ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            self._wait_until_serving()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_serving(self) -> None:
        deadline = time.monotonic() + self.timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"app.py exited with code {self.process.returncode} before serving; "
                    f"log:\n{self.log_text()}"
                )
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"app.py did not serve {self.url} within {self.timeout:.0f} s; "
                    f"log:\n{self.log_text()}"
                )
            time.sleep(0.25)

    def log_text(self) -> str:
        """Everything the process has written so far."""
        if self._log is not None and not self._log.closed:
            self._log.flush()
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """Terminate the process (SIGTERM, then SIGKILL after 10 s) and close the log."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if self._log is not None and not self._log.closed:
            self._log.close()

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
