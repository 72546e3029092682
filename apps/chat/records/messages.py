"""Writes for a thread's transcript entries: sequence numbers and Parley's own notices."""

from __future__ import annotations

from django.db import connection
from django.utils import timezone

from apps.chat.models import NOTICE_SPEAKER, Message, MessageKind, MessageStatus, Thread
from apps.chat.records.text import storable


def allocate_seqs(thread: Thread, count: int) -> list[int]:
    """Reserve `count` consecutive sequence numbers; the row lock serialises concurrent posts.
    One statement (UPDATE … RETURNING, on SQLite and PostgreSQL alike), not an update and a
    read: it is on every message's path."""
    table = connection.ops.quote_name(Thread._meta.db_table)
    seq, updated, pk = "next_seq", "updated_at", "id"  # the model's own column names
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {seq} = {seq} + %s, {updated} = %s "  # noqa: S608
            f"WHERE {pk} = %s RETURNING {seq}",
            [count, connection.ops.adapt_datetimefield_value(timezone.now()), thread.pk],
        )
        row = cursor.fetchone()
    if row is None:
        raise Thread.DoesNotExist(f"No thread {thread.pk}")
    end = row[0]
    return list(range(end - count, end))


def notice_create(*, thread: Thread, text: str, seq: int | None = None) -> Message:
    """A line from Parley itself: shown in the thread, never sent to a model."""
    if seq is None:
        (seq,) = allocate_seqs(thread, 1)
    return Message.objects.create(
        thread=thread,
        seq=seq,
        speaker=NOTICE_SPEAKER,
        kind=MessageKind.NOTICE,
        content=[{"type": "text", "text": storable(text)}],
        status=MessageStatus.DONE,
    )
