"""Reads scoped to the requesting user: strangers see nothing (views turn that into 404)."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from apps.chat.models import IN_FLIGHT, Message, Session, Thread


def sessions_for_user(*, user) -> QuerySet[Session]:
    if not user.is_authenticated:
        return Session.objects.none()
    return Session.objects.filter(owner=user)


def threads_for_user(*, user) -> QuerySet[Thread]:
    if not user.is_authenticated:
        return Thread.objects.none()
    return Thread.objects.filter(session__owner=user).select_related("session")


def thread_messages(*, thread: Thread) -> QuerySet[Message]:
    """A thread's own messages in transcript order."""
    return Message.objects.filter(thread=thread).order_by("seq")


def thread_in_flight(*, thread: Thread) -> QuerySet[Message]:
    return thread_messages(thread=thread).filter(status__in=IN_FLIGHT)


def messages_to_sync(*, thread: Thread, after_seq: int, known: list[str]) -> list[Message]:
    """What a (re)connecting tab lacks: newer messages, the ones it shows, and live ones."""
    condition = Q(seq__gt=after_seq) | Q(status__in=IN_FLIGHT)
    if known:
        condition |= Q(public_id__in=known)
    return list(thread_messages(thread=thread).filter(condition))


def thread_message(*, thread: Thread, public_id: str) -> Message | None:
    """One of the thread's own messages, or None."""
    return thread_messages(thread=thread).filter(public_id=public_id).first()


def transcript_messages(*, thread: Thread, before_seq: int | None = None) -> list[Message]:
    """The thread's transcript as a reader sees it: a fork's inherited history, then its own.

    Notices are left out (they are never sent to models); `before_seq` cuts the thread's own
    part just before that sequence number.
    """
    own = thread_messages(thread=thread).exclude(kind="notice").select_related("author")
    if before_seq is not None:
        own = own.filter(seq__lt=before_seq)
    inherited: list[Message] = []
    if thread.parent_id is not None and thread.forked_from_id is not None:
        fork_point = Message.objects.only("seq").get(pk=thread.forked_from_id)
        inherited = transcript_messages(thread=thread.parent, before_seq=fork_point.seq + 1)
    return inherited + list(own)
