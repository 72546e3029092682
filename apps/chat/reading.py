"""What each person in a room has read: their unread counts per thread and per session, and
marking a thread read. Unread, for one person: the settled replies and the other people's
messages after the last one they saw, of those they may see (whispers only by the audience)."""

from __future__ import annotations

from typing import Any

from django.db.models import Count, IntegerField, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from apps.chat.access import visible_to
from apps.chat.models import USER_SPEAKER, Message, MessageKind, ReadMark, Session, Thread


def _seen_by(user_id: int, thread_ref: str):
    """The last sequence number `user_id` has seen of the thread `thread_ref` points at."""
    marks = ReadMark.objects.filter(thread=OuterRef(thread_ref), user_id=user_id)
    return Coalesce(Subquery(marks.values("seen_seq")[:1]), 0)


def _unread_rows(user) -> QuerySet[Message]:
    settled_reply = Q(kind=MessageKind.CHAT, finished_at__isnull=False) & ~Q(speaker=USER_SPEAKER)
    someone_else = Q(speaker=USER_SPEAKER, author__isnull=False) & ~Q(author_id=user.pk)
    return (
        Message.objects.filter(settled_reply | someone_else)
        .filter(visible_to(user))
        .filter(seq__gt=_seen_by(user.pk, "thread_id"))
        .order_by()
    )


def _count(rows: QuerySet[Message], by: str):
    counted = rows.values(by).annotate(n=Count("pk")).values("n")
    return Coalesce(Subquery(counted[:1], output_field=IntegerField()), 0)


def with_unread_threads(threads: QuerySet[Thread], *, user) -> QuerySet[Thread]:
    """Each thread with `unread`: what `user` has not read of it."""
    return threads.annotate(
        unread=_count(_unread_rows(user).filter(thread=OuterRef("pk")), "thread")
    )


def with_unread_sessions(sessions: QuerySet[Session], *, user) -> QuerySet[Session]:
    """Each session with `unread`: what `user` has not read in its threads."""
    rows = _unread_rows(user).filter(thread__session=OuterRef("pk"))
    return sessions.annotate(unread=_count(rows, "thread__session"))


def thread_unread(*, thread_id: int, user) -> Any:
    """One thread with `user`'s `unread` (its badge in their sidebars)."""
    return with_unread_threads(Thread.objects.filter(pk=thread_id), user=user).get()


def threads_unread(*, thread_ids: list[int], user) -> list[Thread]:
    """Several threads with `user`'s `unread`, in one query (badges after replies settle)."""
    return list(with_unread_threads(Thread.objects.filter(pk__in=thread_ids), user=user))


def session_unread(*, session_id: int, user) -> Session:
    """One session with `user`'s `unread` (its badge on their sessions list)."""
    return with_unread_sessions(Session.objects.filter(pk=session_id), user=user).get()


def seen_seq(*, thread: Thread, user) -> int:
    """The last message of the thread `user` has seen (0: none)."""
    mark = ReadMark.objects.filter(thread=thread, user_id=user.pk).values_list(
        "seen_seq", flat=True
    )
    return mark.first() or 0
