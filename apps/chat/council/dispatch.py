"""Hands replies to the workers: the one place that enqueues a reply's Celery task.

The task is sent by name, so the council never imports the worker code that runs it (the
task module sits above it, in the entry points).
"""

from __future__ import annotations

import logging
from datetime import timedelta
from functools import partial

from celery import current_app
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError
from redis.exceptions import RedisError

from apps.chat.models import Message

logger = logging.getLogger(__name__)
RUN_REPLY_TASK = "apps.chat.tasks.run_reply"
# How long a queued reply's task may wait in the broker before the recovery sweep assumes the
# broker lost it (Redis restarted empty) and enqueues it again.
QUEUED_GRACE_SECONDS = 30


def enqueue_reply(message_pk: int) -> None:
    """Send one reply's task to the workers now. With the broker away the reply stays queued
    with its dispatch time set, and the workers' recovery sweep enqueues it once it is back."""
    try:
        current_app.send_task(RUN_REPLY_TASK, args=[message_pk])
    except (OperationalError, RedisError, OSError) as exc:
        logger.warning("Could not enqueue reply %s (%s); recovery will", message_pk, exc)
        # Known not to be in the broker: due for the very next sweep, not after the grace.
        overdue = timezone.now() - timedelta(seconds=QUEUED_GRACE_SECONDS + 1)
        Message.objects.filter(pk=message_pk).update(dispatched_at=overdue)


def _send_after_commit(message_pk: int) -> None:
    """Sent by the thread that committed, at once: a send handed to a thread of its own
    waited for the GIL behind the answer this thread renders next (11 ms of a reply's first
    token, against 1-2 ms for the send itself). With the broker away the send gives up
    within a second (Celery's publish retries) and the recovery sweep sends it later; the
    commit stands either way."""
    try:
        enqueue_reply(message_pk)
    except Exception:
        logger.exception("Could not enqueue reply %s; recovery will", message_pk)


def dispatch(messages: list[Message]) -> None:
    """Mark replies as started and enqueue their tasks once the transaction commits."""
    if not messages:
        return
    now = timezone.now()
    Message.objects.filter(pk__in=[m.pk for m in messages]).update(dispatched_at=now)
    for message in messages:
        message.dispatched_at = now
        transaction.on_commit(partial(_send_after_commit, message.pk))
