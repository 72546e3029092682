"""Real MCP servers for the tests: one over stdio (a subprocess per connection), one over
streamable HTTP (uvicorn in a thread)."""

from __future__ import annotations

import socket
import sys
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stdio_spec(tmp_path):
    from apps.connectors.client import ServerSpec

    return ServerSpec(
        name="local", kind="stdio", command=sys.executable,
        args=("-m", "tests.connectors.mcp_server"), env={"PYTHONPATH": str(ROOT)},
        timeout=10, workspace=str(tmp_path / "workspace"),
    )  # fmt: skip


class HttpServer:
    def __init__(self):
        import uvicorn

        from tests.connectors.mcp_server import http_app

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        config = uvicorn.Config(http_app(), host="127.0.0.1", port=self.port, log_level="error")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True, name="mcp-http")

    def start(self) -> HttpServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the MCP HTTP server did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture(scope="session")
def mcp_http():
    server = HttpServer().start()
    yield server
    server.stop()


# The reference server from npm (`make test` installs it into tests/node): a third party's
# implementation of the protocol, which asks its client for roots.
EVERYTHING = ROOT / "tests" / "node" / "node_modules" / ".bin" / "mcp-server-everything"


def everything_command() -> str:
    if not EVERYTHING.exists():
        raise RuntimeError(f"{EVERYTHING} is missing: `make node` installs it (make test does)")
    return str(EVERYTHING)


def start_everything_http():
    """The reference server over streamable HTTP, in its own node process: (process, URL)."""
    import os
    import subprocess
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen(
        [everything_command(), "streamableHttp"], env={**os.environ, "PORT": str(port)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 20
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
        except urllib.error.HTTPError:
            return process, url  # it answers (a bare GET is refused): it is up
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("the reference MCP server did not start") from None
            time.sleep(0.1)


@pytest.fixture(scope="session")
def everything_http():
    process, url = start_everything_http()
    yield url
    process.terminate()
    process.wait(10)
