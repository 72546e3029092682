"""Celery tasks: they take ids and hand over to the streaming service."""

import asyncio

from celery import shared_task

from apps.chat.streaming import stream_reply


@shared_task(acks_late=True, ignore_result=True)
def run_reply(message_pk: int) -> None:
    """Stream one role's reply; idempotent per message, so a redelivery never doubles text."""
    asyncio.run(stream_reply(message_pk))
