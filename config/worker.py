"""The worker process type for a process manager (the Procfile's `worker`, a systemd unit, a
container): `python -m config.worker`.

It loads Django, the SDKs and the tasks once and forks the Celery workers from that
(`config/forking.py`), as `make run` does, and starts a worker that dies again from the
loaded process: in about a second, where a cold `celery worker` took 5 to 20 s to boot on a
busy host — and a lone worker's live replies wait for the new one to take them over. The
process manager still restarts this process itself if it stops.

`WORKER_PROCESSES` (default: one per core, up to two), `WORKER_CONCURRENCY` and
`PARLEY_TASK_QUEUE` work as they do for `make run`. SIGTERM or Ctrl-C stops the workers in
order: each hands its live replies to the others first.
"""

from __future__ import annotations

import os
import signal
import sys
import time

from django.core.exceptions import ImproperlyConfigured

from config.forking import SetupFailed, preload
from config.launcher import Supervisor, programs

POLL_SECONDS = 0.25


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    env = dict(os.environ)
    env.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if not env.get("REDIS_URL"):
        # `make run` embeds a Redis for its own processes; a worker on its own joins the
        # web processes' Redis, which it cannot guess.
        print("Set REDIS_URL: the worker takes its replies from the web processes' Redis.")
        return 1
    workers = programs(env, web_fds=[], node=f"-{os.getpid()}")
    supervisor = Supervisor(workers)
    try:
        preload(env)
        supervisor.start()
        while True:
            time.sleep(POLL_SECONDS)
            supervisor.keep_running()
    except KeyboardInterrupt:
        return 0
    except (SetupFailed, ImproperlyConfigured) as exc:
        print(f"Set-up failed: {exc}")
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C: still an orderly stop
        supervisor.stop()


if __name__ == "__main__":
    sys.exit(main())
