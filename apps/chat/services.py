"""Writes for sessions, threads and messages. Each service owns one whole state change."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from apps.chat import events, livestate
from apps.chat.models import (
    IN_FLIGHT,
    USER_SPEAKER,
    Message,
    MessageStatus,
    Session,
    SessionRole,
    Thread,
)
from apps.providers.registry import get_adapter
from apps.roles.models import Role
from apps.roles.selectors import default_roles
from apps.roles.services import role_ensure_default


def session_create(*, owner, name: str = "") -> Session:
    """Create a session with the default roles and a first, empty thread."""
    name = name.strip()[:120] or "New session"
    with transaction.atomic():
        session = Session.objects.create(owner=owner, name=name)
        roles = default_roles() or [role_ensure_default()]
        SessionRole.objects.bulk_create(SessionRole(session=session, role=role) for role in roles)
        thread = Thread.objects.create(session=session)
        session.active_thread = thread
        session.save(update_fields=["active_thread"])
    return session


def thread_create(*, session: Session) -> Thread:
    with transaction.atomic():
        thread = Thread.objects.create(session=session)
        session.active_thread = thread
        session.save(update_fields=["active_thread", "updated_at"])
    return thread


def _allocate_seqs(thread: Thread, count: int) -> list[int]:
    """Reserve `count` consecutive sequence numbers; the row lock serialises concurrent posts."""
    Thread.objects.filter(pk=thread.pk).update(
        next_seq=F("next_seq") + count, updated_at=timezone.now()
    )
    end = Thread.objects.filter(pk=thread.pk).values_list("next_seq", flat=True).get()
    return list(range(end - count, end))


def validate_message_text(text: str) -> str:
    text = (text or "").strip()
    if not text:
        raise ValidationError("Write something before sending.", code="empty")
    limit = settings.PARLEY_MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise ValidationError(
            f"That message is {len(text):,} characters; the limit is {limit:,}. "
            "Shorten it or split it into parts.",
            code="too_long",
        )
    return text


def reply_targets(*, session: Session) -> list[Role]:
    """Who answers an unaddressed message: the session's default role."""
    roles = [link.role for link in session.session_roles.select_related("role").filter(muted=False)]
    defaults = [role for role in roles if role.is_default]
    return defaults[:1] or roles[:1]


def reply_provider(*, session: Session, role: Role):
    """The provider kind, model and credential a role's reply uses in this session.

    The provider is derived from the credential; without one the demo provider answers.
    """
    credential = session.credential
    adapter = get_adapter(credential.provider if credential else "demo")
    if credential is None:
        return adapter.kind, adapter.default_model, None
    model = role.model_override or session.model or adapter.default_model
    return adapter.kind, model, credential


def session_set_provider(*, session: Session, credential, model: str) -> Session:
    """Choose the credential (None: demo) and model for the session's next replies."""
    session.credential = credential
    session.model = model.strip()[:120]
    session.save(update_fields=["credential", "model", "updated_at"])
    return session


@dataclass(frozen=True)
class PostedMessage:
    user_message: Message
    replies: list[Message]


def message_post(*, thread: Thread, author, text: str) -> PostedMessage:
    """Save a user's message and queue one reply per target; publish and enqueue on commit."""
    from apps.chat.tasks import run_reply

    text = validate_message_text(text)
    session = Session.objects.select_related("credential").get(pk=thread.session_id)
    targets = reply_targets(session=session)
    if not targets:
        raise ValidationError("This session has no roles to answer; add one in its settings.")
    with transaction.atomic():
        seqs = _allocate_seqs(thread, 1 + len(targets))
        user_message = Message.objects.create(
            thread=thread,
            seq=seqs[0],
            speaker=USER_SPEAKER,
            author=author,
            content=[{"type": "text", "text": text}],
            status=MessageStatus.DONE,
        )
        replies = []
        for seq, role in zip(seqs[1:], targets, strict=True):
            provider, model, credential = reply_provider(session=session, role=role)
            replies.append(
                Message.objects.create(
                    thread=thread,
                    seq=seq,
                    speaker=role.handle,
                    status=MessageStatus.QUEUED,
                    provider=provider,
                    model=model,
                    credential=credential,
                )
            )
        Session.objects.filter(pk=session.pk).update(updated_at=timezone.now())
        events.publish_messages_added_on_commit(thread=thread, messages=[user_message, *replies])
        for reply in replies:
            transaction.on_commit(lambda pk=reply.pk: run_reply.delay(pk))
    return PostedMessage(user_message=user_message, replies=replies)


@dataclass(frozen=True)
class ClaimedReply:
    message: Message
    restarted: bool


def message_claim(*, message_id: int) -> ClaimedReply | None:
    """Take a queued reply for streaming; None when it is already settled.

    A reply found `streaming` was being streamed by a worker that died (the broker redelivers
    unacknowledged tasks), so it restarts from empty: text is never appended twice.
    """
    now = timezone.now()
    claimed = Message.objects.filter(pk=message_id, status=MessageStatus.QUEUED).update(
        status=MessageStatus.STREAMING, started_at=now, attempt=F("attempt") + 1
    )
    restarted = False
    if not claimed:
        restarted = bool(
            Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
                content=[], started_at=now, attempt=F("attempt") + 1
            )
        )
        if not restarted:
            return None
    message = Message.objects.select_related("thread__session").get(pk=message_id)
    return ClaimedReply(message=message, restarted=restarted)


def message_checkpoint(*, message_id: int, text: str) -> None:
    """Persist a streaming reply's partial text so a dead worker loses nothing shown."""
    Message.objects.filter(pk=message_id, status=MessageStatus.STREAMING).update(
        content=[{"type": "text", "text": text}], updated_at=timezone.now()
    )


def reply_secret(*, message: Message) -> tuple[str, str]:
    """The API key and base URL for a reply's call: decrypted here, on the call path only."""
    credential = message.credential
    if credential is None:
        return "", ""
    return credential.api_key(), credential.base_url


def message_finish(
    *,
    message_id: int,
    status: str,
    content: list[dict],
    error: str = "",
    usage: dict | None = None,
    ttft_ms: int | None = None,
    duration_ms: int | None = None,
) -> Message:
    """Store a reply's final state; the caller publishes the final push."""
    Message.objects.filter(pk=message_id).update(
        status=status,
        content=content,
        error=error,
        usage=usage or {},
        ttft_ms=ttft_ms,
        duration_ms=duration_ms,
        finished_at=timezone.now(),
    )
    return Message.objects.select_related("thread").get(pk=message_id)


def thread_interrupt(*, thread: Thread) -> int:
    """Stop every queued and streaming reply of a thread; partial text is kept.

    Queued replies are settled here (their tasks then find nothing to claim); streaming ones
    are flagged, and their workers close the provider stream and store what they had.
    """
    with transaction.atomic():
        queued = list(thread.messages.filter(status=MessageStatus.QUEUED))
        Message.objects.filter(pk__in=[m.pk for m in queued]).update(
            status=MessageStatus.INTERRUPTED, finished_at=timezone.now()
        )
        for message in queued:
            message.status = MessageStatus.INTERRUPTED
            events.publish_message_replaced_on_commit(message=message, seq=events.SETTLED_SEQ)
    streaming = list(
        thread.messages.filter(status__in=IN_FLIGHT).values_list("public_id", flat=True)
    )
    livestate.request_cancel([str(public_id) for public_id in streaming])
    return len(queued) + len(streaming)
