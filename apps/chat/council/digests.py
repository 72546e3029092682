""" "While you were away": when someone comes back to a shared room's thread with enough
unread, a card sums up what happened since they last read it — who said what, decisions,
open questions — with links to the messages. It is written once per person and return (by
a cheap model of the session's provider, or the demo provider), in a background task; the
page shows it as "catching you up" and the card fills in over the person's socket."""

from __future__ import annotations

import asyncio
import logging

from django.db import IntegrityError, transaction
from django.db.models import Q

from apps.chat.access import session_roles_by_handle, visible_to
from apps.chat.council.summaries import written_text
from apps.chat.display import events
from apps.chat.models import (
    USER_SPEAKER,
    Digest,
    Membership,
    Message,
    MessageKind,
    Thread,
    person_name,
)
from apps.chat.records.text import storable
from apps.chat.selectors import message_block_text
from apps.providers.registry import describe, get_adapter
from apps.providers.types import (
    NO_AUTH,
    ChatMessage,
    ChatRequest,
    ProviderError,
    SystemBlock,
    Usage,
)

logger = logging.getLogger(__name__)

DIGEST_MIN_UNREAD = 5  # fewer new messages than this: the "new" divider is enough
DIGEST_MAX_CHARS = 60_000  # of transcript sent: the most recent part when more happened
DIGEST_TASK = "apps.chat.tasks.make_digest"
DIGEST_RULES = (
    "You catch one person up on a group chat between several people and AI roles that went "
    "on while they were away. In at most 8 short Markdown bullet points say who said what, "
    "what was decided and which questions are still open. Cite the messages you draw on as "
    "[#N] with their numbers. Address the reader as you; never invent anything."
)


def digest_for_return(
    *, thread: Thread, user, seen_before: int, shared: bool | None = None
) -> Digest | None:
    """The digest of what `user` missed since `seen_before`, asked for now if there is
    enough of it (once per person and return) — or None: a room of one, too little new.
    `shared`: whether others are in the room, when the caller knows."""
    if shared is None:
        shared = Membership.objects.filter(session_id=thread.session_id).exists()
    if not shared:
        return None
    existing = Digest.objects.filter(thread=thread, user=user, after_seq=seen_before).first()
    if existing is not None:
        return existing
    missed = _missed(thread=thread, user=user, after_seq=seen_before)
    if missed.count() < DIGEST_MIN_UNREAD:
        return None
    upto = missed.order_by("-seq").values_list("seq", flat=True).first() or seen_before
    try:
        with transaction.atomic():
            digest = Digest.objects.create(
                thread=thread, user=user, after_seq=seen_before, upto_seq=upto
            )
            transaction.on_commit(lambda: _enqueue(digest.pk))
    except IntegrityError:  # another tab of theirs asked at the same moment
        return Digest.objects.filter(thread=thread, user=user, after_seq=seen_before).first()
    return digest


def _enqueue(digest_id: int) -> None:
    from celery import current_app

    current_app.send_task(DIGEST_TASK, args=[digest_id])


def _missed(*, thread: Thread, user, after_seq: int):
    """What others said in the thread after `after_seq` that `user` may see."""
    return (
        Message.objects.filter(thread=thread, seq__gt=after_seq, kind=MessageKind.CHAT)
        .filter(visible_to(user))
        .exclude(Q(speaker=USER_SPEAKER) & Q(author=user))
        .exclude(status__in=("queued", "streaming"))
    )


def digest_request(digest: Digest, *, model: str) -> ChatRequest:
    messages = list(
        _missed(thread=digest.thread, user=digest.user, after_seq=digest.after_seq)
        .filter(seq__lte=digest.upto_seq)
        .select_related("author")
        .order_by("seq")
    )
    roles = session_roles_by_handle(
        digest.thread.session, {m.speaker for m in messages} - {USER_SPEAKER}
    )
    lines = []
    for message in messages:
        who = (
            person_name(message.author)
            if message.is_user
            else (
                roles[message.speaker].display_name if message.speaker in roles else message.speaker
            )
        )
        lines.append(f"[#{message.seq}] {who}: {message_block_text(message)}")
    transcript = "\n\n".join(lines)[-DIGEST_MAX_CHARS:]
    reader = person_name(digest.user)
    prompt = f"The reader is {reader}. What happened while they were away:\n\n{transcript}"
    return ChatRequest(
        model=model,
        system=(SystemBlock(DIGEST_RULES),),
        messages=(ChatMessage("user", ({"type": "text", "text": prompt},)),),
        max_tokens=1024,
    )


def digest_make(*, digest_id: int) -> Digest | None:
    """Write a pending digest with the session's provider's cheap model and show it on the
    person's tabs (a failure is said on the card; the page never waited for it)."""
    digest = (
        Digest.objects.select_related("thread__session__credential", "user")
        .filter(pk=digest_id, status=Digest.Status.PENDING)
        .first()
    )
    if digest is None:
        return None
    credential = digest.thread.session.credential
    adapter = get_adapter(credential.provider if credential else "demo")
    model = (
        describe(adapter.kind).cheap_model or digest.thread.session.model or adapter.default_model
    )
    api_key, base_url = (credential.api_key(), credential.base_url) if credential else ("", "")
    auth = credential.auth() if credential else NO_AUTH
    request = digest_request(digest, model=model)
    try:
        text, usage = asyncio.run(
            written_text(adapter, request, api_key=api_key, base_url=base_url, auth=auth)
        )
    except ProviderError as exc:
        logger.warning("A digest of thread %s failed: %s", digest.thread_id, exc)
        text, usage = "", Usage()
    digest.status = Digest.Status.DONE if text.strip() else Digest.Status.FAILED
    digest.text, digest.provider, digest.model = storable(text.strip()), adapter.kind, model
    digest.usage = usage.as_dict()
    with transaction.atomic():
        digest.save(update_fields=["status", "text", "provider", "model", "usage"])
        events.publish_digest_on_commit(digest=digest)
    return digest
