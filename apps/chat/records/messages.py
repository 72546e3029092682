"""Writes for a thread's transcript entries: sequence numbers and Parley's own notices."""

from __future__ import annotations

from django.db.models import F
from django.utils import timezone

from apps.chat.models import NOTICE_SPEAKER, Message, MessageKind, MessageStatus, Thread
from apps.chat.records.text import storable


def allocate_seqs(thread: Thread, count: int) -> list[int]:
    """Reserve `count` consecutive sequence numbers; the row lock serialises concurrent posts."""
    Thread.objects.filter(pk=thread.pk).update(
        next_seq=F("next_seq") + count, updated_at=timezone.now()
    )
    end = Thread.objects.filter(pk=thread.pk).values_list("next_seq", flat=True).get()
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
