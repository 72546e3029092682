"""The Celery application; workers run every role call in the background."""

import logging
import os
import threading
import time

from celery import Celery
from celery.signals import task_failure, worker_ready, worker_shutdown, worker_shutting_down
from kombu.asynchronous import get_event_loop

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

logger = logging.getLogger(__name__)
app = Celery("parley")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

_sweeps_stop = threading.Event()
# An import's worker is taken for dead after five minutes without a heartbeat: looking for
# such jobs twice a minute is plenty (each second, it was a third of an idle worker's CPU).
IMPORTS_SWEEP_SECONDS = 30.0
_imports_swept_at: float | None = None


def recover_replies_once() -> None:
    """Replies a worker left unfinished (it died, or the broker lost its tasks)."""
    from django.db import close_old_connections

    from apps.chat.council.replies import replies_recover

    try:
        restarted = replies_recover()
    except Exception:  # never keep a worker from starting, never end the sweeps
        logger.exception("Could not recover unfinished replies")
        return
    finally:
        # This thread lives on: a pooled connection goes back (PostgreSQL); SQLite's is kept,
        # as every thread keeps its own (opening the file costs more than the look).
        close_old_connections()
    if restarted:
        logger.warning("Restarted %d unfinished replies", len(restarted))
    global _imports_swept_at
    now = time.monotonic()
    if _imports_swept_at is None or now - _imports_swept_at >= IMPORTS_SWEEP_SECONDS:
        _imports_swept_at = now
        end_abandoned_imports()


def end_abandoned_imports() -> None:
    """Imports whose worker died while reading or writing them end as failed, with why."""
    from django.db import close_old_connections

    from apps.imports.services import jobs_sweep

    try:
        ended = jobs_sweep()
    except Exception:
        logger.exception("Could not end abandoned imports")
        return
    finally:
        close_old_connections()
    if ended:
        logger.warning("Ended %d imports whose worker stopped", ended)


def recovery_sweeps(stop: threading.Event, interval: float) -> None:
    """Look again every `interval` seconds until `stop`: a worker that dies while others run
    (or one restarted before its lease lapsed) leaves replies only the next look finds. The
    workers take turns: one look per interval among them all (the look's queries were most
    of an idle worker's CPU, and each worker made its own)."""
    from apps.chat.livestate import sweep_claim

    while not stop.wait(interval):
        if sweep_claim(interval):
            recover_replies_once()


_beat_stop = threading.Event()


def _node(sender) -> str:
    """The worker's Celery name: `worker_ready` sends its consumer, `worker_shutting_down`
    the name itself."""
    if isinstance(sender, str):
        return sender
    return getattr(sender, "hostname", None) or f"worker-{os.getpid()}"


@worker_ready.connect
def start_beat(sender=None, **kwargs) -> None:
    """Note this worker as alive for `/readyz` (apps/ops/workers.py)."""
    from apps.ops.workers import beat

    _beat_stop.clear()
    threading.Thread(
        target=beat, args=(_node(sender), _beat_stop), name="parley-beat", daemon=True
    ).start()


@worker_shutting_down.connect
def stop_beat(sender=None, **kwargs) -> None:
    from apps.ops.workers import gone

    _beat_stop.set()
    gone(_node(sender))


@task_failure.connect
def count_failed_job(sender=None, **kwargs) -> None:
    """A background task that raised, for Prometheus (`parley_failed_jobs`)."""
    from apps.ops import metrics

    metrics.FAILED_JOBS.labels(getattr(sender, "name", "unknown")).inc()


@worker_ready.connect
def start_recovery(**kwargs) -> None:
    from django.conf import settings

    from config.heap import freeze_startup_heap

    freeze_startup_heap()
    recover_replies_once()
    minutes = settings.PARLEY_RETENTION_SWEEP_MINUTES
    if minutes:
        from config.retention import retention_sweeps

        threading.Thread(
            target=retention_sweeps, args=(_sweeps_stop, minutes), name="parley-retention",
            daemon=True,
        ).start()  # fmt: skip
    interval = settings.PARLEY_RECOVERY_INTERVAL_SECONDS
    if interval:
        _sweeps_stop.clear()
        threading.Thread(
            target=recovery_sweeps, args=(_sweeps_stop, interval), name="parley-recovery",
            daemon=True,
        ).start()  # fmt: skip


@worker_shutdown.connect
def stop_recovery(**kwargs) -> None:
    _sweeps_stop.set()


@worker_shutting_down.connect
def hand_over_streams(**kwargs) -> None:
    """Asked to stop (SIGTERM, a deploy): give the live replies to the other workers now
    rather than stream them to their end (a minute for a long one); the tasks then end."""
    from apps.chat.live.hub import stream_hub_hand_over

    stream_hub_hand_over()
    _wake_consumer_loop()


def _wake_consumer_loop() -> None:
    """Celery's loop notices a stop only when its poll returns, up to a second after the
    signal; a callback queued from another thread wakes the poll now."""
    hub = get_event_loop()
    if hub is not None:
        threading.Thread(target=hub.call_soon, args=(lambda: None,), daemon=True).start()


@worker_shutdown.connect
def stop_stream_hub(**kwargs) -> None:
    """The tasks have finished by now (those of replies handed over are in the broker): end
    the event loop that hosted their streams."""
    from apps.chat.live.hub import stream_hub_stop

    stream_hub_stop()
