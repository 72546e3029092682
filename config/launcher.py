"""`make run`: prepare the database and start Redis (if needed), the worker and the web server.

Ctrl-C stops every child process. With REDIS_URL unset an embedded Redis-compatible server
is started on a free port and every child is pointed at it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from apps.ops import metrics
from config.embedded_redis import start_embedded_redis
from config.env import env_int
from config.forking import ForkedChild, SetupFailed, preload

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent


class Supervisor:
    """Keeps the web server and the worker running: a child that dies is started again after
    a pause that doubles while it keeps dying (1 s up to 30 s), and the launcher says so."""

    FIRST_PAUSE, LONGEST_PAUSE, STABLE_SECONDS = 1.0, 30.0, 60.0

    def __init__(self, programs: dict[str, list[str]], *, web_fds: tuple[int, ...] = ()) -> None:
        self.programs, self.web_fds = programs, web_fds
        self.running: dict[str, ForkedChild] = {}
        self.started: dict[str, float] = {}
        self.pause = dict.fromkeys(programs, self.FIRST_PAUSE)
        self.restart_at: dict[str, float] = {}

    def _spawn(self, name: str) -> None:
        argv = self.programs[name]  # forked from this preloaded process (config/forking.py)
        own = tuple(int(argv[i + 1]) for i, word in enumerate(argv) if word == "--fd")
        self.running[name] = ForkedChild(argv, keep_fds=own, close_fds=self.web_fds)
        self.started[name] = time.monotonic()

    def start(self) -> None:
        for name in self.programs:
            self._spawn(name)

    def keep_running(self) -> None:
        now = time.monotonic()
        for name, child in list(self.running.items()):
            if name in self.restart_at:
                if now >= self.restart_at[name]:
                    del self.restart_at[name]
                    print(f"Starting the {name} again.", flush=True)
                    self._spawn(name)
                continue
            code = child.poll()
            if code is None:
                continue
            metrics.process_gone(child.pid)
            if now - self.started[name] >= self.STABLE_SECONDS:
                self.pause[name] = self.FIRST_PAUSE  # it had been running fine
            pause = self.pause[name]
            print(
                f"The {name} stopped unexpectedly (exit code {code}); starting it again in "
                f"{pause:.0f} s.",
                flush=True,
            )
            self.restart_at[name] = now + pause
            self.pause[name] = min(self.LONGEST_PAUSE, pause * 2)

    def stop(self, *, timeout: float = 15) -> None:
        """SIGTERM every child (a worker hands its live replies over, a web process sends its
        tabs on), then wait for them all; a child still there after `timeout` is killed."""
        children = list(self.running.values())
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """The web's port, opened here once per web process (SO_REUSEPORT: the kernel spreads new
    connections evenly over them, where one shared socket goes to whichever process wakes
    first). A port in use is a clear error before anything starts; a web process that is
    restarted takes its socket back, so connections made meanwhile wait instead of failing."""
    sockets = []
    for _ in range(count):
        listener = socket.create_server((host, port), backlog=1024, reuse_port=count > 1)
        listener.set_inheritable(True)
        sockets.append(listener)
    return sockets


def default_processes() -> int:
    """One per core, up to two: every process keeps its own database connections (up to
    PARLEY_DB_POOL_SIZE on PostgreSQL), so a many-core host would otherwise exhaust the
    server's connections. Set WEB_PROCESSES and WORKER_PROCESSES to go further."""
    return max(1, min(os.cpu_count() or 1, 2))


# Celery's worker-to-worker chatter, which Parley does not use (it never revokes tasks, and
# finds dead workers by their replies' leases): heartbeat events every 2 s, the gossip that
# reads them, and the start-up "mingle" (a second's wait). Idle, they were half a worker's CPU.
QUIET_WORKER = ("--without-heartbeat", "--without-gossip", "--without-mingle")


def programs(env: dict[str, str], web_fds: list[int], *, node: str = "") -> dict[str, list[str]]:
    """The worker and web processes: a web process per socket of `web_fds`. `node` tells
    this host's sets of workers apart in their Celery names (`worker1{node}@host`)."""
    workers = env_int("WORKER_PROCESSES", default_processes(), minimum=1)
    concurrency = env.get("WORKER_CONCURRENCY", "256")
    queue = env.get("PARLEY_TASK_QUEUE", "parley")
    found: dict[str, list[str]] = {}
    for n in range(1, workers + 1):
        name = "worker" if workers == 1 else f"worker {n}"
        found[name] = [str(BIN / "celery"), "-A", "config", "worker", "--pool", "threads",
                       "--concurrency", concurrency, "--loglevel", "INFO", "-Q", queue,
                       "-n", f"worker{n}{node}@%h", *QUIET_WORKER]  # fmt: skip
    for n, fd in enumerate(web_fds, start=1):
        name = "web" if len(web_fds) == 1 else f"web {n}"
        found[name] = [PYTHON, "-m", "config.web", "--fd", str(fd), "config.asgi:application"]
    return found


def main() -> int:
    # SIGTERM (e.g. from a process manager) stops the children just like Ctrl-C does. SIGINT
    # is handled explicitly: started in the background (`make run &` from a script, nohup, a
    # service manager) the process inherits it ignored, and `kill -INT` would stop nothing.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    host = env.get("HOST", "127.0.0.1")
    port = env.get("PORT", "8000")
    redis = None
    if not env.get("REDIS_URL"):
        # Never the web's own port: when PORT is a free port someone picked a moment ago (as
        # the tests and the bench do), the kernel may offer that same port to Redis.
        redis = start_embedded_redis(
            avoid=frozenset({int(port)}) if port.isdigit() else frozenset()
        )
        env["REDIS_URL"] = redis.url
        print(f"Embedded Redis-compatible server on {redis.url}")

    supervisor: Supervisor | None = None

    def stop_all():
        # A second Ctrl-C must not cut the orderly stop short (the kernel still reaps the
        # children if the launcher itself is killed).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if supervisor is not None:
            supervisor.stop()
        if redis is not None:
            redis.stop()

    try:
        # A web and a worker process per core by default: a process runs Python on one core
        # at a time (the GIL), so one of each would leave a core idle while a burst of
        # messages waits on the other.
        webs = env_int("WEB_PROCESSES", default_processes(), minimum=1)
        if ":" in host:  # daphne adopts IPv4 sockets only: one web process binds it itself
            fds, web = (
                [],
                [PYTHON, "-m", "config.web", "-b", host, "-p", port, "config.asgi:application"],
            )
        else:
            try:
                listeners = listening_sockets(host, int(port), webs)
            except OSError as exc:  # the port is taken, or not this machine's address
                print(f"Could not listen on {host}:{port}: {exc.strerror or exc}")
                return 1
            fds, web = [listener.fileno() for listener in listeners], []
        found = programs(env, fds)
        if web:
            found["web"] = web
        metrics.start_afresh()  # this launcher's processes are the host's only ones
        preload(env, before_fork=("migrate --noinput", "ensure_local_user"))
        supervisor = Supervisor(found, web_fds=tuple(fds))
        supervisor.start()
        print(f"\nParley is running at http://{host}:{port}/  (Ctrl-C stops everything)\n")
        while True:
            time.sleep(0.5)
            supervisor.keep_running()
            if redis is not None and redis.process.poll() is not None:
                # Same port, so every child finds it again (empty: replies resume from the
                # database, tabs reconnect and catch up).
                print("The embedded Redis stopped unexpectedly; starting it again.", flush=True)
                redis.workdir.cleanup()
                redis = start_embedded_redis(port=redis.port)
    except KeyboardInterrupt:
        print("\nStopping Parley…")
        return 0
    except SetupFailed as exc:
        print(f"Set-up failed: {exc}")
        return 1
    except ImproperlyConfigured as exc:
        print(f"Set-up failed: {exc}")
        return 1
    finally:
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
