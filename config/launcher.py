"""`make run`: prepare the database and start Redis (if needed), the worker and the web server.

Ctrl-C stops every child process. With REDIS_URL unset an embedded Redis-compatible server
is started on a free port and every child is pointed at it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from config.embedded_redis import die_with_parent, start_embedded_redis

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
BIN = Path(PYTHON).parent


def _manage(*args: str, env: dict[str, str]) -> None:
    subprocess.run([PYTHON, "manage.py", *args], cwd=ROOT, env=env, check=True)


def _program(child: subprocess.Popen) -> str:
    """The program a child runs, for messages."""
    args = child.args
    return str(args[0] if isinstance(args, list) else args)


def main() -> int:
    # SIGTERM (e.g. from a process manager) stops the children just like Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    env.setdefault("DEBUG", "true")
    host = env.get("HOST", "127.0.0.1")
    port = env.get("PORT", "8000")
    redis = None
    if not env.get("REDIS_URL"):
        redis = start_embedded_redis()
        env["REDIS_URL"] = redis.url
        print(f"Embedded Redis-compatible server on {redis.url}")

    children: list[subprocess.Popen] = []

    def stop_all():
        # A second Ctrl-C must not cut the orderly stop short (the kernel still reaps the
        # children if the launcher itself is killed).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 15
        for child in children:
            try:
                child.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                child.kill()
        if redis is not None:
            redis.stop()

    try:
        _manage("migrate", "--noinput", env=env)
        _manage("ensure_local_user", env=env)
        concurrency = env.get("WORKER_CONCURRENCY", "256")
        children.append(
            subprocess.Popen(
                [str(BIN / "celery"), "-A", "config", "worker", "--pool", "threads",
                 "--concurrency", concurrency, "--loglevel", "INFO",
                 "-Q", env.get("PARLEY_TASK_QUEUE", "parley")],
                cwd=ROOT, env=env, preexec_fn=die_with_parent,
            )
        )  # fmt: skip
        children.append(
            subprocess.Popen(
                [str(BIN / "daphne"), "-b", host, "-p", port, "config.asgi:application"],
                cwd=ROOT, env=env, preexec_fn=die_with_parent,
            )
        )  # fmt: skip
        print(f"\nParley is running at http://{host}:{port}/  (Ctrl-C stops everything)\n")
        while all(child.poll() is None for child in children):
            time.sleep(0.5)
        failed = [_program(child) for child in children if child.poll() not in (None, 0)]
        if failed:
            print(f"A process stopped unexpectedly: {', '.join(map(str, failed))}")
        return 1
    except KeyboardInterrupt:
        print("\nStopping Parley…")
        return 0
    except subprocess.CalledProcessError as exc:
        print(f"Set-up failed: {exc}")
        return exc.returncode or 1
    finally:
        stop_all()


if __name__ == "__main__":
    sys.exit(main())
