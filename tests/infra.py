"""Early pytest plugin (loaded with -p): real services for the suite, and no way out.

Runs before pytest-django imports the settings, so it can point them at a Redis-compatible
server: REDIS_URL when set (the suite then uses that database and flushes it), otherwise an
embedded redis-server on a free port. Every non-loopback connection attempt fails the test.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import uuid
from pathlib import Path

import pytest

_embedded = None
_real_connect = socket.socket.connect
_real_connect_ex = socket.socket.connect_ex


denied_attempts: list[str] = []


class NetworkAccessDenied(AssertionError):
    """The suite tried to reach a host other than this machine."""


def _check_address(address) -> None:
    if not isinstance(address, tuple):
        return  # unix sockets
    host = address[0]
    try:
        ip = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        if host == "localhost":
            return
        ip = None
    if ip is None or not ip.is_loopback:
        # Recorded as well as raised: a client library may swallow the exception, and the
        # autouse fixture below fails the test anyway.
        denied_attempts.append(str(host))
        raise NetworkAccessDenied(f"Tests may only reach loopback addresses, not {host}.")


def _guarded_connect(self, address):
    _check_address(address)
    return _real_connect(self, address)


def _guarded_connect_ex(self, address):
    _check_address(address)
    return _real_connect_ex(self, address)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args):
    global _embedded
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # Playwright's sync API keeps an event loop in the main thread; the ORM calls made by
    # browser tests around it are ordinary synchronous code.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    run_id = uuid.uuid4().hex[:8]
    os.environ["PARLEY_TASK_QUEUE"] = f"parley-test-{run_id}"
    os.environ["PARLEY_CHANNEL_PREFIX"] = f"parley-test-{run_id}"
    # Each parallel worker (pytest-xdist) has its own workspace folder; its database is its
    # own already (pytest-django names it per worker; SQLite's file carries the process id).
    os.environ["PARLEY_WORKSPACE_ROOT"] = str(
        Path(__file__).resolve().parent.parent / "var" / f"test-workspaces-{run_id}"
    )
    # Its own metrics folder too: the processes a test starts sum their samples there.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(
        Path(__file__).resolve().parent.parent / "var" / f"test-metrics-{run_id}"
    )
    # The suite's process is a web server, a Celery worker (256 threads) and the tests' own
    # threads at once, which no deployed process is: on PostgreSQL it gets a larger pool
    # than a process's default 16 (CI's full PostgreSQL run once ran out of it, and hung,
    # in the terminal-client tests near the suite's end).
    os.environ.setdefault("PARLEY_DB_POOL_SIZE", "40")
    # Tests that leave replies behind on purpose run the recovery themselves, when they choose.
    os.environ["PARLEY_RECOVERY_INTERVAL_SECONDS"] = "0"
    os.environ["PARLEY_RETENTION_SWEEP_MINUTES"] = "0"  # the tests sweep when they choose
    if not os.environ.get("REDIS_URL"):
        from config.embedded_redis import start_embedded_redis

        _embedded = start_embedded_redis()  # one per worker process, on a free port
        os.environ["REDIS_URL"] = _embedded.url
    else:
        os.environ["REDIS_URL"] = worker_redis_url(os.environ["REDIS_URL"])
    import redis

    redis.Redis.from_url(os.environ["REDIS_URL"]).flushdb()
    socket.socket.connect = _guarded_connect
    socket.socket.connect_ex = _guarded_connect_ex


def worker_redis_url(url: str) -> str:
    """A parallel worker's own Redis database: the given one for the first worker, the next
    ones for the others (the suite flushes each), refused loudly past the server's last."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    index = int(worker.removeprefix("gw") or 0)
    if not index:
        return url
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if base + count - 1 > 15:
        raise pytest.UsageError(
            f"REDIS_URL's database {base} leaves no room for {count} parallel workers "
            f"(they use {base} to {base + count - 1}; Redis has 0-15): pick a lower one."
        )
    return urlunsplit(parts._replace(path=f"/{base + index}"))


@pytest.fixture(autouse=True)
def _no_network_beyond_loopback():
    denied_attempts.clear()
    yield
    if denied_attempts:
        attempts = ", ".join(denied_attempts)
        denied_attempts.clear()
        pytest.fail(f"The test tried to reach non-loopback hosts: {attempts}")


def pytest_report_header(config):
    where = "embedded redis-server" if _embedded else "REDIS_URL"
    return [f"parley: Redis at {os.environ.get('REDIS_URL')} ({where})"]


def pytest_unconfigure(config):
    socket.socket.connect = _real_connect
    socket.socket.connect_ex = _real_connect_ex
    if "apps.chat.live.hub" in sys.modules:  # its subscription, before Redis goes away
        sys.modules["apps.chat.live.hub"].stream_hub_stop()
    if _embedded is not None:
        _embedded.stop()
    import shutil

    shutil.rmtree(os.environ.get("PARLEY_WORKSPACE_ROOT", ""), ignore_errors=True)
    shutil.rmtree(os.environ.get("PROMETHEUS_MULTIPROC_DIR", ""), ignore_errors=True)
    from django.conf import settings

    if settings.configured:
        test_db = settings.DATABASES["default"].get("TEST", {}).get("NAME") or ""
        if test_db.endswith(".sqlite3"):
            for suffix in ("", "-wal", "-shm", "-journal"):
                Path(test_db + suffix).unlink(missing_ok=True)
