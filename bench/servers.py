"""The two servers the streaming benchmark drives side by side: Parley, started as `make run`
starts it, and the floor (`bench/floor.py`); how a client logs in to Parley."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import aiohttp

from bench.procs import pids_under

ROOT = Path(__file__).resolve().parent.parent
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Floor:
    """The minimal relay (bench/floor.py), started beside Parley against the same upstream."""

    name = "floor"
    credentials = None

    def __init__(self, workdir: Path, upstream: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.log = (workdir / "floor.log").open("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bench.floor", str(self.port), upstream], cwd=ROOT,
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip

    def output(self) -> str:
        return (self.workdir / "floor.log").read_text()

    def pids(self) -> list[int]:
        return [self.process.pid]

    def threads(self, count: int) -> list[str]:
        return [str(uuid.uuid4()) for _ in range(count)]

    async def wait_ready(self) -> None:
        await wait_serving(self)

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


async def wait_serving(server, path: str = "/login/", seconds: float = 120) -> None:
    """Until `path` answers 200 (the server has started), or the server's log as an error."""
    deadline = time.monotonic() + seconds
    async with aiohttp.ClientSession() as http:
        while time.monotonic() < deadline:
            if server.process.poll() is not None:
                raise RuntimeError(server.output()[-4000:])
            try:
                async with http.get(f"{server.url}{path}") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.5)
    raise RuntimeError(f"{server.name} did not start:\n" + server.output()[-4000:])


class Parley:
    """Parley started as `make run` starts it, in a scratch directory (or, `production`, on
    the machine's PostgreSQL and Redis)."""

    name = "Parley"

    def __init__(self, workdir: Path, *, production: bool = False) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if k not in {"REDIS_URL", "DATABASE_URL"}}
        env.update(PORT=str(self.port), PARLEY_VAR_DIR=str(workdir), PYTHONUNBUFFERED="1")
        env["DEBUG"] = "false"  # as deployed: no per-query debug log, no template reloads
        env["DJANGO_SETTINGS_MODULE"] = "config.settings"
        if production:
            env["DATABASE_URL"] = PRODUCTION_DATABASE
            env["REDIS_URL"] = PRODUCTION_REDIS
            subprocess.run(["dropdb", "-h", "127.0.0.1", "-U", "postgres", "--if-exists",
                            "parley_bench"], check=True)  # fmt: skip
            subprocess.run(["createdb", "-h", "127.0.0.1", "-U", "postgres", "parley_bench"],
                           check=True)  # fmt: skip
            subprocess.run(["redis-cli", "-n", "13", "flushdb"], check=True, capture_output=True)
        self.env = env
        self.log = (workdir / "launcher.log").open("w+")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "config.launcher"], cwd=ROOT, env=env,
            stdout=self.log, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self.workdir = workdir
        self.credentials: tuple[str, str] | None = None

    def output(self) -> str:
        return (self.workdir / "launcher.log").read_text()

    def pids(self) -> list[int]:
        """The launcher's children: web, worker and (embedded) Redis."""
        return pids_under(self.process.pid)

    async def wait_ready(self) -> None:
        await wait_serving(self)
        match = re.search(r"local login: (\S+) / (\S+)", self.output())
        if match is None:
            raise RuntimeError("No local login in the launcher's output")
        self.credentials = (match[1], match[2])

    def redis_url(self) -> str:
        if "REDIS_URL" in self.env:
            return self.env["REDIS_URL"]
        match = re.search(r"Embedded Redis-compatible server on (\S+)", self.output())
        return match[1] if match else ""

    def stop(self) -> None:
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


PRODUCTION_DATABASE = "postgres://postgres@127.0.0.1:5432/parley_bench"
PRODUCTION_REDIS = "redis://127.0.0.1:6379/13"


def prepare(parley: Parley, upstream: str, count: int) -> list[str]:
    """A credential for the upstream and `count` threads, through the services (as the
    credential page and New chat would)."""
    os.environ.update(
        PARLEY_VAR_DIR=str(parley.workdir), REDIS_URL=parley.redis_url(),
        DJANGO_SETTINGS_MODULE="config.settings",
    )  # fmt: skip
    if "DATABASE_URL" in parley.env:
        os.environ["DATABASE_URL"] = parley.env["DATABASE_URL"]
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from apps.chat.records.sessions import session_create, session_set_provider
    from apps.chat.records.threads import thread_create
    from apps.providers.services import credential_save

    assert parley.credentials is not None
    user = get_user_model().objects.get(username=parley.credentials[0])
    credential = credential_save(
        owner=user, name="bench upstream", provider="openai_compatible", api_key="bench",
        base_url=upstream,
    )  # fmt: skip
    session = session_create(owner=user, name="Streaming bench")
    session_set_provider(session=session, credential=credential, model="bench-model")
    threads = [str(thread_create(session=session).public_id) for _ in range(count)]
    from django.db import connections

    from apps.chat.display.events import announcer

    announcer().drain(300)  # the sidebars' pushes for those threads, rendered here, not later

    connections.close_all()
    return threads


async def browser_login(http: aiohttp.ClientSession, parley: Parley, user: str, password: str):
    async with http.get(f"{parley.url}/login/") as response:
        token = CSRF.search(await response.text())[1]
    data = {"username": user, "password": password, "csrfmiddlewaretoken": token}
    async with http.post(f"{parley.url}/login/", data=data, allow_redirects=False) as response:
        if response.status != 302:
            raise RuntimeError(f"login failed: {response.status}")
