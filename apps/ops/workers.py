"""Which workers are alive, for `/readyz`: each worker notes itself in Redis every few
seconds, and a worker not seen for a while is taken for gone (it died, or its host did)."""

from __future__ import annotations

import contextlib
import threading
import time

import redis
from django.conf import settings

SEEN_KEY = "parley:workers:seen"  # a sorted set: Celery node name -> when last seen
BEAT_SECONDS = 10.0
GONE_AFTER_SECONDS = 30.0


def _client() -> redis.Redis:
    # Short timeouts: a readiness probe that hangs on Redis is a probe that fails late.
    return redis.Redis.from_url(
        settings.REDIS_URL, socket_connect_timeout=2, socket_timeout=2, decode_responses=True
    )


def workers_seen(client: redis.Redis | None = None) -> int:
    """How many workers noted themselves within the last GONE_AFTER_SECONDS."""
    client = client or _client()
    now = time.time()
    client.zremrangebyscore(SEEN_KEY, "-inf", now - GONE_AFTER_SECONDS)
    return int(client.zcount(SEEN_KEY, now - GONE_AFTER_SECONDS, "+inf"))


def beat(node: str, stop: threading.Event) -> None:
    """Note this worker as alive every BEAT_SECONDS until `stop` (one that dies drops off
    the list after GONE_AFTER_SECONDS)."""
    client = _client()
    while True:
        with contextlib.suppress(redis.RedisError):  # Redis is away: the next beat notes it
            client.zadd(SEEN_KEY, {node: time.time()})
        if stop.wait(BEAT_SECONDS):
            return


def gone(node: str) -> None:
    """A worker stopping in order leaves the list at once."""
    with contextlib.suppress(redis.RedisError):
        _client().zrem(SEEN_KEY, node)
