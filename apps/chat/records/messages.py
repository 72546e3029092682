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


def greetings_post(*, thread: Thread, roles, person_name: str) -> list[Message]:
    """Each character's greeting (its card's first message) opens a new chat, in roster
    order, as in the application the card came from: a settled reply of that role, which the
    roles read as the chat's start. Roles without a card greet nobody."""
    greetings = []
    for role in roles:
        character = (role.card or {}).get("character") or {}
        text = character.get("first_mes") if isinstance(character, dict) else None
        if isinstance(text, str) and text.strip():
            said = text.replace("{{char}}", role.display_name).replace("{{user}}", person_name)
            greetings.append((role, storable(said.strip())))
    if not greetings:
        return []
    seqs = allocate_seqs(thread, len(greetings))
    now = timezone.now()
    return Message.objects.bulk_create(
        Message(
            thread=thread, seq=seq, speaker=role.handle, kind=MessageKind.CHAT,
            content=[{"type": "text", "text": said}], status=MessageStatus.DONE,
            started_at=now, finished_at=now,
        )
        for seq, (role, said) in zip(seqs, greetings, strict=True)
    )  # fmt: skip
