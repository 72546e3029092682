"""`make run` loads Django, the provider SDKs, the URLs (and so the API's schemas), the Celery
tasks and the compiled templates once, in the launcher, and forks each web and worker process
from it: a child starts in a fraction of a second instead of importing it all again, and the
pages it loaded stay shared between the children (copy on write) instead of each holding its
own copy. The launcher's heap is frozen before the forks, so no garbage collection in a child
writes to those pages (a collection sets a flag on every object it walks).

What must be each process's own is made after the fork: database connections, Redis clients,
event loops and daphne's Twisted reactor (daphne installs it when first imported, which is why
`daphne` is not among the installed apps: `django.setup()` would import it here).
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

from setproctitle import getproctitle, setproctitle

from config.embedded_redis import die_with_parent

ROOT = Path(__file__).resolve().parent.parent
# setproctitle takes the room for longer titles from the environment's block, which it finds
# only before the environment changes (the launcher sets REDIS_URL and more): take it now.
setproctitle(getproctitle())

# Beyond what the URLs import: what the web's ASGI stack and the worker's replies load.
PRELOADED = (
    "django.core.asgi", "channels.auth", "channels.routing", "channels.security.websocket",
    "apps.chat.live.routing",  # the consumers
    "apps.providers.adapters.anthropic", "apps.providers.adapters.gemini",
    "apps.providers.adapters.openai",  # the SDKs and their aiohttp transports
)  # fmt: skip


class SetupFailed(Exception):
    """A management command the launcher runs before the children start failed."""


def preload(env: dict[str, str], *, before_fork: tuple[str, ...] = ()) -> None:
    """Load in this process what every child would load, with the children's environment,
    and run the management commands `before_fork` (here, not in processes of their own that
    would each load Django again)."""
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    for command in before_fork:
        try:
            call_command(*command.split())
        except Exception as exc:  # a database that cannot be reached, a failed migration
            raise SetupFailed(f"manage.py {command}: {exc}") from exc
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (every view, and the API's schemas)
    for module in PRELOADED:
        importlib.import_module(module)
    from config.celery import app

    app.loader.import_default_modules()  # the tasks and what they import
    _compile_templates()
    connections.close_all()  # no child may share the commands' connections
    for connection in connections.all(initialized_only=True):
        # PostgreSQL's pool runs threads (its scheduler and workers) that a fork cannot copy:
        # close it here, and each child opens its own on its first query.
        close_pool = getattr(connection, "close_pool", None)
        if close_pool is not None:
            close_pool()
    gc.collect()
    gc.freeze()


def _compile_templates() -> None:
    """Every template, parsed into the cached loader the children inherit."""
    from django.template import TemplateSyntaxError, engines

    for engine in engines.all():
        for folder in engine.template_dirs:
            for path in Path(folder).rglob("*.html"):
                with contextlib.suppress(TemplateSyntaxError):  # shown where it is used
                    engine.get_template(str(path.relative_to(folder)))


class ForkedChild:
    """A child forked from the launcher, with the part of `subprocess.Popen`'s interface the
    launcher uses (poll, wait, send_signal, kill)."""

    def __init__(self, argv: list[str], *, keep_fds: tuple[int, ...], close_fds: tuple[int, ...]):
        self.args = argv
        self.returncode: int | None = None
        if threading.active_count() > 1:  # a fork copies only this thread: say so loudly
            raise RuntimeError("The launcher must not run threads when it forks its children.")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(argv, [fd for fd in close_fds if fd not in keep_fds])
        self.pid = pid

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, number: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, number)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _child(argv: list[str], close_fds: list[int]) -> None:
    """In the forked child: become the program `argv` names, never return."""
    code = 1
    try:
        die_with_parent()
        for number in (signal.SIGINT, signal.SIGTERM):
            signal.signal(number, signal.SIG_DFL)  # the program installs its own
        for fd in close_fds:  # the other web processes' sockets
            os.close(fd)
        setproctitle(" ".join(argv))
        os.chdir(ROOT)
        code = run_program(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def run_program(argv: list[str]) -> int:
    """What the command line would run, in this (preloaded) process: the Celery worker
    (`celery -A config worker …`) or a web process (`python -m config.web …`)."""
    if Path(argv[0]).name == "celery" and argv[1:3] == ["-A", "config"]:
        from config.celery import app

        app.worker_main(argv[3:])
        return 0
    if argv[1:3] == ["-m", "config.web"]:
        from config import web

        web.main(argv[3:])
        return 0
    raise ValueError(f"Not a program the launcher forks: {argv}")
