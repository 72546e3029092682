"""Writes for threads: creation, names, branches and clearing."""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import F, OuterRef, Subquery
from django.utils import timezone

from apps.chat.display import events
from apps.chat.models import (
    USER_SPEAKER,
    Attachment,
    Message,
    MessageKind,
    MessageStatus,
    QueuedMessage,
    ReadMark,
    Session,
    Thread,
    ThreadSummary,
    person_name,
)
from apps.chat.records.attachments import attachments_forget
from apps.chat.records.context import thread_snapshot
from apps.chat.records.messages import greetings_post
from apps.chat.records.naming import branch_name, thread_name, unique_name
from apps.chat.records.text import clean_name
from apps.chat.selectors import transcript_messages


def thread_create(*, session: Session) -> Thread:
    with transaction.atomic():
        thread = Thread.objects.create(session=session)
        thread_snapshot(thread=thread)
        session.active_thread = thread
        session.save(update_fields=["active_thread", "updated_at"])
        roles = [link.role for link in session.session_roles.select_related("role")]
        greetings_post(thread=thread, roles=roles, person_name=person_name(session.owner))
        events.publish_thread_tree_on_commit(session_id=session.pk)
    return thread


def thread_rename(*, thread: Thread, label: str) -> Thread:
    thread.label = clean_name(label, what="thread name")
    thread.save(update_fields=["label", "updated_at"])
    events.publish_thread_renamed_on_commit(thread=thread)
    return thread


def thread_mark_seen(*, thread: Thread, user, seq: int | None = None) -> int:
    """`user` has seen the thread up to `seq` (else all of it); returns what they had seen
    before, so their page can mark where the new messages start. Never goes back."""
    before, moved = _mark_seen(thread=thread, user=user, seq=seq)
    if moved:
        events.publish_seen_on_commit(thread=thread, user_id=user.pk)  # their other tabs too
    return before


def thread_autoname(*, thread: Thread, text: str) -> Thread:
    """Name an unnamed thread from its first substantive message (unique in the session)."""
    if thread.label:
        return thread
    name = thread_name(text)
    if not name:
        return thread
    with transaction.atomic():
        # Two threads named at once in one session must not both take the same free name.
        Session.objects.select_for_update().filter(pk=thread.session_id).first()
        taken = set(
            Thread.objects.filter(session_id=thread.session_id)
            .exclude(pk=thread.pk)
            .values_list("label", flat=True)
        )
        return thread_rename(thread=thread, label=unique_name(name, taken))


def thread_autoname_from_replies(*, thread: Thread) -> Thread:
    """A thread the person's messages could not name ("hi", "?"): named once a turn has
    settled, from the latest summary of it, else from its first reply with words."""
    if thread.label:
        return thread
    # Only what everyone in the room may read names it: public replies, and a summary only
    # of a thread without whispers (a summary may retell one).
    whispered = Message.objects.filter(thread=thread, private=True).exists()
    summary = ThreadSummary.objects.filter(thread=thread).order_by("-pk").first()
    candidates = [summary.text] if summary is not None and not whispered else []
    replies = (
        Message.objects.filter(
            thread=thread, kind=MessageKind.CHAT, status=MessageStatus.DONE, private=False
        )
        .exclude(speaker=USER_SPEAKER)
        .order_by("seq")[:3]
    )
    candidates += [reply.text for reply in replies]
    for text in candidates:
        if thread_name(text):
            return thread_autoname(thread=thread, text=text)
    return thread


def thread_branch(*, thread: Thread, message: Message | None) -> Thread:
    """A new thread whose history is `thread`'s transcript up to and including `message`.

    `message` may be inherited from an ancestor; the branch then hangs off the thread that
    owns it. None makes an empty branch of `thread`.
    """
    parent = message.thread if message is not None else thread
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=parent.session_id).first()
        taken = set(
            Thread.objects.filter(session_id=parent.session_id).values_list("label", flat=True)
        )
        branch = Thread.objects.create(
            session_id=parent.session_id,
            parent=parent,
            forked_from=message,
            label=branch_name(parent.label, taken),
            # It goes on talking to the same role (read afresh: a post may just have moved it).
            sticky_handle=Thread.objects.values_list("sticky_handle", flat=True).get(pk=parent.pk),
            # It goes on with the persona and memory its parent's roles were told.
            persona_version_id=parent.persona_version_id,
            memory_version_id=parent.memory_version_id,
        )
        Session.objects.filter(pk=parent.session_id).update(
            active_thread=branch, updated_at=timezone.now()
        )
        events.publish_thread_tree_on_commit(session_id=parent.session_id)
    return branch


def _materialise_inherited(child: Thread) -> None:
    """Copy a branch's inherited history into it, so it survives its parent being cleared."""
    fork = child.forked_from
    inherited = (
        transcript_messages(thread=fork.thread, before_seq=fork.seq + 1) if fork is not None else []
    )
    count = len(inherited)
    if count:
        # Two steps keep (thread, seq) unique at every moment on every database.
        Message.objects.filter(thread=child).update(seq=F("seq") + 1_000_000)
        Message.objects.filter(thread=child).update(seq=F("seq") - 1_000_000 + count)
        Message.objects.bulk_create(
            Message(
                thread=child,
                seq=index,
                speaker=m.speaker,
                author=m.author,
                kind=m.kind,
                content=m.content,
                status=m.status,
                error=m.error,
                provider=m.provider,
                model=m.model,
                usage=m.usage,
                ttft_ms=m.ttft_ms,
                duration_ms=m.duration_ms,
                alternatives=m.alternatives,
                private=m.private,
                audience_roles=m.audience_roles,
            )
            for index, m in enumerate(inherited, start=1)
        )
        _copy_along(inherited, Message.objects.filter(thread=child, seq__lte=count))
    Thread.objects.filter(pk=child.pk).update(
        parent=None, forked_from=None, next_seq=F("next_seq") + count
    )


def _copy_along(originals: list[Message], copies) -> None:
    """What hangs off each copied message goes with it: a whisper's audience (so it stays a
    whisper) and the attachments (the same stored bytes)."""
    by_seq = {copy.seq: copy for copy in copies}
    copy_of = {m.pk: by_seq[index] for index, m in enumerate(originals, start=1)}
    Audience = Message.audience.through
    Audience.objects.bulk_create(
        Audience(message_id=copy_of[row.message_id].pk, user_id=row.user_id)
        for row in Audience.objects.filter(message_id__in=copy_of)
    )
    attachments = []
    for attachment in Attachment.objects.filter(message_id__in=copy_of):
        attachment.message = copy_of[attachment.message_id or 0]
        attachment.pk, attachment.public_id = None, uuid.uuid4()
        attachments.append(attachment)
    Attachment.objects.bulk_create(attachments)


def thread_drop_queue(*, thread: Thread) -> None:
    """Forget the messages waiting for the thread's turn to finish."""
    with transaction.atomic():
        QueuedMessage.objects.filter(thread=thread).delete()
        events.publish_thread_status_on_commit(thread=thread)


def thread_clear_messages(*, thread: Thread) -> Thread:
    """Delete every message of a thread with nothing running; its branches keep their history."""
    with transaction.atomic():
        for child in thread.children.select_related("forked_from__thread"):
            _materialise_inherited(child)
        attachments_forget(Attachment.objects.filter(message__thread=thread))
        thread.messages.all().delete()
        thread.turns.all().delete()
        thread.summaries.all().delete()
        thread.queued.all().delete()
        thread.sticky_handle = ""
        thread.save(update_fields=["sticky_handle", "updated_at"])
    return thread


def _mark_seen(*, thread: Thread, user, seq: int | None = None) -> tuple[int, bool]:
    """`user` has seen the thread up to `seq` (else all of it): (what they had seen before,
    whether that moved). Never past the latest message, never back; read against the rows as
    they are now (the caller's thread may predate the messages it marks), in one query when
    nothing moves (a page opened again)."""
    mark = ReadMark.objects.filter(thread=OuterRef("pk"), user_id=user.pk).values("seen_seq")
    latest, before = (
        Thread.objects.filter(pk=thread.pk)
        .annotate(seen=Subquery(mark[:1]))
        .values_list("next_seq", "seen")
        .get()
    )
    seen = latest - 1 if seq is None else max(0, min(seq, latest - 1))
    if before is None:
        # A first visit; a second tab doing the same at once keeps its own (a message's
        # difference, never backwards).
        ReadMark.objects.bulk_create(
            [ReadMark(thread=thread, user_id=user.pk, seen_seq=seen)], ignore_conflicts=True
        )
        return 0, seen > 0
    if seen <= before:
        return before, False
    moved = ReadMark.objects.filter(thread=thread, user_id=user.pk, seen_seq__lt=seen).update(
        seen_seq=seen
    )
    return before, bool(moved)
