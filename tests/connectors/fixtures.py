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
