"""Parley as deployed, for fault tests: separate daphne and Celery worker processes (the
Procfile's commands) on the test database, with their own Redis that a test may kill and
restart, and tabs that follow a thread over a real websocket.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from django.conf import settings
from django.db import connection

from config.embedded_redis import EmbeddedRedis, free_port, start_embedded_redis
from tests.chat.tabs import Tab

ROOT = Path(__file__).resolve().parent.parent
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')
BIN = Path(sys.executable).parent


def database_url() -> str:
    """The test database, as a URL the child processes can open."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{db['NAME']}"
    user = db.get("USER") or ""
    password = f":{db['PASSWORD']}" if db.get("PASSWORD") else ""
    host = db.get("HOST") or "127.0.0.1"
    port = db.get("PORT") or "5432"
    return f"postgres://{user}{password}@{host}:{port}/{db['NAME']}"


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    log: Path
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        return self.process.poll() is None


@dataclass
class Topology:
    workdir: Path
    redis: EmbeddedRedis | None = None
    children: list[Child] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.redis = start_embedded_redis()
        run = uuid.uuid4().hex[:8]
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "REDIS_URL": self.redis.url,
            "PARLEY_TASK_QUEUE": f"parley-faults-{run}",
            "PARLEY_CHANNEL_PREFIX": f"parley-faults-{run}",
            "PARLEY_RECOVERY_INTERVAL_SECONDS": "1",
            "PARLEY_VAR_DIR": str(self.workdir),
            "PROMETHEUS_MULTIPROC_DIR": str(self.workdir / "metrics"),  # these processes' own
            "SECRET_KEY": settings.SECRET_KEY,  # the test's session cookies are valid here
            "PARLEY_ENCRYPTION_KEYS": ",".join(settings.PARLEY_ENCRYPTION_KEYS),
            "DEBUG": "false",
            "PYTHONUNBUFFERED": "1",
        }

    def start_worker(
        self, name: str = "worker", *, supervised: bool = False, env: dict | None = None
    ) -> Child:
        """A Celery worker started cold (`celery -A config worker`), or `supervised` as the
        Procfile starts it (`python -m config.worker`: one worker forked from a loaded
        process that forks it again when it dies; see `forked_worker`); `env` over the
        topology's."""
        if supervised:
            env = {"WORKER_PROCESSES": "1", "WORKER_CONCURRENCY": "64", **(env or {})}
            return self._start(name, [sys.executable, "-m", "config.worker"], env=env)
        return self._start(
            name,
            [str(BIN / "celery"), "-A", "config", "worker", "--pool", "threads",
             "--concurrency", "64", "--loglevel", "INFO", "-n", f"{name}@%h",
             "-Q", self.env["PARLEY_TASK_QUEUE"]],
            env=env,
        )  # fmt: skip

    @staticmethod
    def forked_worker(child: Child) -> int | None:
        """The pid of the Celery worker a supervised worker runs now (None between two)."""
        found = Path(f"/proc/{child.process.pid}/task/{child.process.pid}/children")
        pids = [int(pid) for pid in found.read_text().split()] if found.exists() else []
        return pids[0] if pids else None

    def start_web(self, name: str = "web", port: int = 0, env: dict | None = None) -> Child:
        """A daphne process (on `port` again, for a restart; `env` over the topology's)."""
        port = port or free_port()
        child = self._start(
            name,
            [
                sys.executable,
                "-m",
                "config.web",
                "-b",
                "127.0.0.1",
                "-p",
                str(port),
                "config.asgi:application",
            ],
            env=env,
        )
        child.port = port
        deadline = time.monotonic() + 60  # as for a worker: four suites' load slows a start
        while True:
            try:
                import urllib.request

                urllib.request.urlopen(f"{child.url}/login/", timeout=1).close()
                return child
            except OSError:
                assert child.alive() and time.monotonic() < deadline, child.output()
                time.sleep(0.2)

    def _start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Child:
        runs = sum(child.name == name for child in self.children)
        log = self.workdir / (f"{name}.log" if not runs else f"{name}.{runs + 1}.log")
        process = subprocess.Popen(
            argv, cwd=ROOT, env={**self.env, **(env or {})}, stdout=log.open("w"),
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        child = Child(name, process, log)
        self.children.append(child)
        return child

    def wait_worker_ready(self, child: Child, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while "ready." not in child.output():
            assert child.alive() and time.monotonic() < deadline, child.output()
            time.sleep(0.2)

    def kill_redis(self) -> None:
        assert self.redis is not None
        self.redis.process.kill()
        self.redis.process.wait()

    def start_redis_again(self) -> None:
        """The same port, empty, as a restarted Redis without persistence comes back."""
        assert self.redis is not None
        self.redis.workdir.cleanup()
        self.redis = start_embedded_redis(port=self.redis.port)

    def stop(self) -> None:
        for child in self.children:
            if child.alive():
                child.process.send_signal(signal.SIGTERM)
        for child in self.children:
            try:
                child.process.wait(20)
            except subprocess.TimeoutExpired:
                child.process.kill()
        if self.redis is not None:
            self.redis.stop()

    def logs(self) -> str:
        return "\n".join(f"--- {c.name}\n{c.output()[-4000:]}" for c in self.children)


@dataclass
class FollowedTab:
    """A tab on one thread over a real websocket that reconnects (as htmx does) and syncs."""

    web: Child
    thread_id: str
    cookie: str
    tab: Tab = field(default_factory=Tab)
    reconnects: int = 0
    closes: list[int] = field(default_factory=list)
    seen_texts: dict[str, list[str]] = field(default_factory=dict)  # what it showed over time
    # When each reply's shown text last changed, and the longest it went without changing.
    changed_at: dict[str, float] = field(default_factory=dict)
    longest_stall: dict[str, float] = field(default_factory=dict)
    stall_window: dict[str, tuple[float, float]] = field(default_factory=dict)  # its start, end
    # Web processes behind a balancer: a reconnect goes to the next one (else the same one).
    others: list[Child] = field(default_factory=list)
    # Each socket's life (monotonic times: "opened", "synced", "closed"): where a stall went.
    sockets: list[dict[str, float]] = field(default_factory=list)

    async def follow(self, until) -> None:
        """Follow until `until(tab)` holds; reconnect whenever the socket closes."""
        webs = [self.web, *self.others]
        async with aiohttp.ClientSession() as http:
            while True:
                web = webs[self.reconnects % len(webs)]
                url = web.url.replace("http", "ws") + f"/ws/threads/{self.thread_id}/"
                headers = {"Origin": web.url, "Cookie": self.cookie}
                try:
                    life: dict[str, float] = {}
                    self.sockets.append(life)
                    async with http.ws_connect(url, headers=headers, max_msg_size=0) as ws:
                        life["opened"] = time.monotonic()
                        after = max([0, *self._seqs()])
                        pending = [
                            mid
                            for mid in self.tab.bubbles
                            if self.tab.status(mid) in ("queued", "streaming")
                        ]
                        await ws.send_str(
                            json.dumps({"type": "sync", "after_seq": after, "pending": pending})
                        )
                        async for frame in ws:
                            if frame.type != aiohttp.WSMsgType.TEXT:
                                break
                            if "synced" not in life and 'data-synced="true"' in frame.data:
                                life["synced"] = time.monotonic()
                            self.tab.apply(frame.data)
                            self._remember()
                            if until(self.tab):
                                return
                        self.closes.append(ws.close_code or 0)
                except aiohttp.ClientError:
                    pass
                life["closed"] = time.monotonic()
                self.reconnects += 1
                await asyncio.sleep(0.5)

    def stall_story(self, since: float) -> str:
        """The longest stall of any reply, and each socket's life around it (seconds from
        `since`): whether the tab waited for a socket, for its sync, or for the text."""
        if not self.stall_window:
            return "no stall"
        start, end = max(self.stall_window.values(), key=lambda w: w[1] - w[0])
        lives = [
            " ".join(f"{what} {at - since:.2f}" for what, at in life.items())
            for life in self.sockets
            if life.get("closed", end) >= start and life.get("opened", start) <= end
        ]
        return f"still {start - since:.2f}..{end - since:.2f} s; sockets: " + " | ".join(lives)

    def _seqs(self) -> list[int]:
        import re

        return [int(s) for s in re.findall(r'data-seq="(\d+)"', "".join(self.tab.frames))]

    def _remember(self) -> None:
        now = time.monotonic()
        for message_id, bubble in self.tab.bubbles.items():
            if bubble.text:
                texts = self.seen_texts.setdefault(message_id, [])
                if not texts or texts[-1] != bubble.text:
                    texts.append(bubble.text)
                    if message_id in self.changed_at:
                        gap = now - self.changed_at[message_id]
                        if gap > self.longest_stall.get(message_id, 0.0):
                            self.longest_stall[message_id] = gap
                            self.stall_window[message_id] = (self.changed_at[message_id], now)
                    self.changed_at[message_id] = now


async def post(web, thread_id: str, cookie: str, text: str, attachments: tuple = ()) -> None:
    """The composer's POST, as a browser sends it (with the ids of waiting `attachments`)."""
    async with aiohttp.ClientSession(headers={"Cookie": cookie}) as http:
        async with http.get(f"{web.url}/t/{thread_id}/") as page:
            token = CSRF.search(await page.text())[1]
            csrf_cookie = page.cookies["csrftoken"].value
        async with http.post(
            f"{web.url}/t/{thread_id}/messages/",
            data=[("text", text), ("csrfmiddlewaretoken", token),
                  *(("attachments", str(attachment)) for attachment in attachments)],
            headers={"Cookie": f"{cookie}; csrftoken={csrf_cookie}", "HX-Request": "true",
                     "Referer": web.url},
        ) as response:  # fmt: skip
            assert response.status == 200, await response.text()


async def interrupt(web, thread_id: str, cookie: str) -> float:
    return await press(web, thread_id, cookie, f"/t/{thread_id}/interrupt/")


async def press(web, thread_id: str, cookie: str, path: str) -> float:
    """A button's htmx POST (Stop, Retry …) from the thread's page; how long it took."""
    async with aiohttp.ClientSession(headers={"Cookie": cookie}) as http:
        async with http.get(f"{web.url}/t/{thread_id}/") as page:
            token = CSRF.search(await page.text())[1]
            csrf_cookie = page.cookies["csrftoken"].value
        started = time.monotonic()
        async with http.post(
            f"{web.url}{path}",
            headers={"Cookie": f"{cookie}; csrftoken={csrf_cookie}", "X-CSRFToken": token,
                     "HX-Request": "true", "Referer": web.url},
        ) as response:  # fmt: skip
            assert response.status < 300, await response.text()
        return time.monotonic() - started
