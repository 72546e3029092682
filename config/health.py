"""What a balancer, an orchestrator and Prometheus ask of a web process.

`/healthz`: the process answers (it touches nothing else: a database outage must not get
every web process restarted). `/readyz`: it can serve — the database, Redis and the file
storages answer (files, workspaces, import uploads), and at least one worker was seen
lately. `/metrics`: the host's metrics in Prometheus's text format (apps/ops/metrics.py),
with the queue's depth read at the scrape.
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Callable, Iterator

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.files.storage import FileSystemStorage, storages
from django.db import connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from apps.ops.metrics import METRICS_DIR
from apps.ops.workers import workers_seen

logger = logging.getLogger(__name__)


def _database() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return True


def _redis() -> bool:
    from apps.chat.livestate import shared_sync_client

    return bool(shared_sync_client().ping())


def _storage() -> bool:
    """Every storage Parley writes (files, workspaces, import uploads) answers."""
    for alias in ("default", "workspace", "imports"):
        storage = storages[alias]
        if isinstance(storage, FileSystemStorage):
            location = storage.location
            os.makedirs(location, exist_ok=True)  # as the storage's first save would
            if not os.access(location, os.W_OK):
                return False
        else:
            storage.exists("parley-readyz")  # object storage: a HEAD that must not fail
    return True


def _workers() -> bool:
    return workers_seen() > 0


CHECKS: dict[str, Callable[[], bool]] = {
    "database": _database,
    "redis": _redis,
    "storage": _storage,
    "workers": _workers,
}


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    return HttpResponse("ok\n", content_type="text/plain")


@login_not_required
@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    """Each check's outcome, "ok" or "failed" (why goes to the log, not to whoever asks)."""
    results = {}
    for name, check in CHECKS.items():
        try:
            ok = check()
        except Exception as exc:  # any failure means not ready
            logger.warning("Not ready: the %s check failed (%s: %s)", name, type(exc).__name__, exc)
            ok = False
        results[name] = "ok" if ok else "failed"
    ready = all(outcome == "ok" for outcome in results.values())
    return JsonResponse({"ready": ready, "checks": results}, status=200 if ready else 503)


class _QueueDepth:
    """Read at each scrape: replies waiting for a worker, and tasks waiting in the broker."""

    def collect(self) -> Iterator:
        from prometheus_client.core import GaugeMetricFamily

        from apps.chat.livestate import shared_sync_client
        from apps.chat.models import Message, MessageStatus

        queued = Message.objects.filter(status=MessageStatus.QUEUED).count()
        yield GaugeMetricFamily(
            "parley_replies_queued", "Replies waiting for a worker to start them", value=queued
        )
        waiting = shared_sync_client().llen(settings.CELERY_TASK_DEFAULT_QUEUE)
        yield GaugeMetricFamily(
            "parley_broker_queue_depth", "Tasks in the broker that no worker has taken yet",
            value=waiting,
        )  # fmt: skip


@login_not_required
@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The host's metrics; only for a scrape with the token (PARLEY_METRICS_TOKEN)."""
    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
    from prometheus_client.multiprocess import MultiProcessCollector

    token = settings.PARLEY_METRICS_TOKEN
    if not token:
        raise Http404("Metrics are off: set PARLEY_METRICS_TOKEN.")
    sent = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    if not hmac.compare_digest(sent.encode(), token.encode()):
        return HttpResponse(
            "A metrics token is needed.\n", status=401, content_type="text/plain",
            headers={"WWW-Authenticate": "Bearer"},
        )  # fmt: skip
    registry = CollectorRegistry()  # a fresh one per scrape: every process's files, summed
    MultiProcessCollector(registry, path=str(METRICS_DIR))
    registry.register(_QueueDepth())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
