"""Celery tasks: they take ids and hand over to the live path."""

from celery import shared_task

from apps.chat.council import digests
from apps.chat.council.dispatch import RUN_REPLY_TASK
from apps.chat.live.engine import run_reply_on_hub


@shared_task(name=RUN_REPLY_TASK, acks_late=True, ignore_result=True)
def run_reply(message_pk: int) -> None:
    """Stream one role's reply on this worker's hub and wait until it has settled (so the task
    is acknowledged only then); idempotent per message, so a redelivery never doubles text."""
    run_reply_on_hub(message_pk)


@shared_task(name=digests.DIGEST_TASK, ignore_result=True)
def make_digest(digest_id: int) -> None:
    """Write one "while you were away" card (see `digests`)."""
    digests.digest_make(digest_id=digest_id)
