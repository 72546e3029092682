"""Writes for a role's reply row: its placeholder, claim, checkpoints and final state."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.chat.display import events
from apps.chat.models import (
    BudgetDay,
    Message,
    MessageStatus,
    Session,
    SessionRole,
    Thread,
    Turn,
)
from apps.chat.records.budgets import budget_spend
from apps.chat.records.text import storable, storable_parts
from apps.chat.selectors import reply_provider
from apps.ops import metrics
from apps.providers.types import NO_AUTH, Auth
from apps.roles.models import Role

logger = logging.getLogger(__name__)


def reply_placeholder(
    *,
    thread: Thread,
    session: Session,
    role: Role,
    seq: int,
    turn: Turn,
    stage: int,
    link: SessionRole | None = None,
    budget_day: BudgetDay | None = None,
) -> Message:
    """A queued reply bubble for `role`, with the provider and model it will use (`link`:
    the role's session settings, when the caller has read them), charged to `budget_day`."""
    provider, model, credential = reply_provider(session=session, role=role, link=link)
    return Message.objects.create(
        thread=thread,
        seq=seq,
        speaker=role.handle,
        status=MessageStatus.QUEUED,
        provider=provider,
        model=model,
        credential=credential,
        turn=turn,
        stage=stage,
        budget_day=budget_day,
    )


@dataclass(frozen=True)
class ClaimedReply:
    message: Message
    # Taken over from a worker that died mid-stream: the text it had checkpointed, which the
    # new run continues (never erases).
    resumed: bool = False
    # Taken over too often: settled here as an error with its text kept, not streamed again.
    gave_up: bool = False


def message_claim(*, message_id: int) -> ClaimedReply | None:
    """Take a queued reply for streaming; None when it is already settled.

    A reply found `streaming` was being streamed by a worker that died (its lease lapsed or
    the broker redelivered its task): it is taken over with its text kept. After
    PARLEY_MAX_REPLY_ATTEMPTS runs it ends as an error instead: a reply that keeps killing
    its worker must not turn into an endless series of paid calls.
    """
    now = timezone.now()
    claimed = Message.objects.filter(pk=message_id, status=MessageStatus.QUEUED).update(
        status=MessageStatus.STREAMING, started_at=now, attempt=F("attempt") + 1
    )
    resumed = gave_up = False
    if not claimed:
        attempts = settings.PARLEY_MAX_REPLY_ATTEMPTS
        resumed = bool(
            Message.objects.filter(
                pk=message_id, status=MessageStatus.STREAMING, attempt__lt=attempts
            ).update(attempt=F("attempt") + 1)
        )
        if resumed:  # its worker died mid-stream
            metrics.TAKEOVERS.labels("lapsed").inc()
        else:
            gave_up = bool(
                Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
                    status=MessageStatus.ERROR,
                    error=f"Stopped after {attempts} attempts: the reply kept failing on the "
                    "server. The text so far is kept; Retry runs it again.",
                    finished_at=now,
                )
            )
            if not gave_up:
                return None
    # The session's owner is among the names a reply must not speak for (`reply_setup`).
    message = Message.objects.select_related("thread__session__owner").get(pk=message_id)
    # A queued reply that already holds text was asked to Continue: it goes on from there.
    resumed = resumed or bool(claimed and message.content)
    return ClaimedReply(message=message, resumed=resumed, gave_up=gave_up)


def reply_is_queued(*, message_id: int) -> bool:
    return Message.objects.filter(pk=message_id, status=MessageStatus.QUEUED).exists()


def replies_checkpoint(*, texts: dict[int, str]) -> None:
    """Persist streaming replies' partial text (message pk -> text) in one transaction, so a
    dead worker loses nothing shown."""
    now = timezone.now()
    with transaction.atomic():
        for message_id, text in texts.items():
            Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
                content=[{"type": "text", "text": storable(text)}], updated_at=now
            )


def reply_secret(*, message: Message) -> tuple[str, str, Auth]:
    """The API key, base URL and way of sending the key for a reply's call: decrypted here, on
    the call path only."""
    credential = message.credential
    if credential is None:
        return "", "", NO_AUTH
    return credential.api_key(), credential.base_url, credential.auth()


def message_finish(
    *,
    message_id: int,
    status: str,
    content: list[dict],
    error: str = "",
    usage: dict | None = None,
    ttft_ms: int | None = None,
    duration_ms: int | None = None,
    stop_reason: str = "",
    continuations: int = 0,
    log: list[dict] | None = None,
) -> Message:
    """Store a reply's final state (with its event log); the caller publishes the final push.

    Only a reply still in flight is settled: one that Stop already settled (its worker was
    unreachable) keeps that ending, with the fuller text this run has.
    """
    settled = Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
        status=status,
        content=storable_parts(content),
        error=storable(error),
        usage=usage or {},
        ttft_ms=ttft_ms,
        duration_ms=duration_ms,
        stop_reason=stop_reason,
        continuations=F("continuations") + continuations,
        finished_at=timezone.now(),
        **({"log": log} if log is not None else {}),
    )
    if stop_reason == "max_tokens" and status == MessageStatus.DONE:
        logger.warning("Reply %s is cut off after %d continuation(s)", message_id, continuations)
    if not settled:
        Message.objects.filter(pk=message_id, status=MessageStatus.INTERRUPTED).update(
            content=storable_parts(content)
        )
    message = Message.objects.select_related("thread__session").get(pk=message_id)
    budget_spend(budget_day_id=message.budget_day_id, usage=usage)  # what this run used
    return message


def message_fail_unsaved(*, message_id: int, reason: str) -> Message:
    """End a reply whose final save failed: an error, with its last checkpointed text."""
    Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
        status=MessageStatus.ERROR,
        error=storable(
            f"The reply could not be saved ({reason}); its text up to the last checkpoint is kept."
        ),
        finished_at=timezone.now(),
    )
    return Message.objects.select_related("thread__session").get(pk=message_id)


def reply_retarget(*, message: Message, session: Session, role: Role) -> Message:
    """Give a waiting reply to another role (an AI mention chose who answers next)."""
    provider, model, credential = reply_provider(session=session, role=role)
    message.speaker, message.provider, message.model = role.handle, provider, model
    message.credential = credential
    message.save(update_fields=["speaker", "provider", "model", "credential", "updated_at"])
    events.publish_message_replaced_on_commit(message=message, seq=0)
    return message
