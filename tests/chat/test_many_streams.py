"""Hundreds of live streams on one worker: every reply exact, no database connection storm."""

from __future__ import annotations

import threading

import pytest
from django.conf import settings as django_settings
from django.db import connection, connections

from apps.chat.council.posting import message_post
from apps.chat.council.requests import request_for_reply
from apps.chat.models import Message, MessageStatus
from apps.chat.records.threads import thread_create
from apps.providers.adapters.demo import demo_reply_text
from tests.conftest import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS = 200
POSTGRES_MAX_CONNECTIONS = 100


def server_connections() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()")
        return cursor.fetchone()[0]


@pytest.mark.slow
@pytest.mark.heavy
def test_two_hundred_concurrent_streams_on_one_worker_finish_exact(
    alice, alice_thread, celery_worker, settings
):
    settings.PARLEY_DEMO_FIRST_TOKEN_MS = 100
    settings.PARLEY_DEMO_TOKENS_PER_SECOND = 40  # ~200 tokens: each reply streams for ~5 s
    on_postgres = connection.vendor == "postgresql"
    if on_postgres:
        pool = django_settings.DATABASES["default"]["OPTIONS"]["pool"]
        assert pool["max_size"] < POSTGRES_MAX_CONNECTIONS
    threads = [alice_thread] + [
        thread_create(session=alice_thread.session) for _ in range(STREAMS - 1)
    ]
    replies = [
        message_post(thread=thread, author=alice, text=f"Stream number {n}").replies[0]
        for n, thread in enumerate(threads)
    ]

    peak = [0]
    done = threading.Event()

    def watch_connections() -> None:
        try:
            while not done.wait(0.25):
                peak[0] = max(peak[0], server_connections())
        finally:  # a dead thread's connection never goes back to the pool
            connections.close_all()

    watcher = threading.Thread(target=watch_connections, daemon=True)
    if on_postgres:
        watcher.start()
    try:
        wait_until(
            lambda: (
                not Message.objects.filter(
                    pk__in=[r.pk for r in replies], status__in=[MessageStatus.QUEUED, "streaming"]
                ).exists()
            ),
            timeout=180,
            message="200 streams did not all settle",
        )
    finally:
        done.set()

    settled = list(Message.objects.filter(pk__in=[r.pk for r in replies]).order_by("pk"))
    assert {m.status for m in settled} == {MessageStatus.DONE}, [
        (m.status, m.error) for m in settled if m.status != MessageStatus.DONE
    ][:5]
    for message in settled:
        expected = demo_reply_text(request_for_reply(message=message))
        assert message.text == expected.rstrip(), f"reply {message.pk} is not exact"
        assert message.attempt == 1  # nothing crashed and was recovered
    if on_postgres:
        watcher.join()
        assert 0 < peak[0] < POSTGRES_MAX_CONNECTIONS
