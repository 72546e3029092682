"""Celery tasks: they take ids and hand over to the live path."""

import asyncio

from celery import shared_task

from apps.chat.council.dispatch import RUN_REPLY_TASK
from apps.chat.live.engine import stream_reply


@shared_task(name=RUN_REPLY_TASK, acks_late=True, ignore_result=True)
def run_reply(message_pk: int) -> None:
    """Stream one role's reply; idempotent per message, so a redelivery never doubles text."""
    asyncio.run(stream_reply(message_pk))
