"""Writing a conversation brought from elsewhere (an export of ChatGPT, Claude, Open WebUI,
LibreChat or Parley) as a session: its main thread and its branches, each message with its
time and model, the person's attachments, all in one transaction. The caller (the imports app)
has read and laid out the source; this only writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from apps.chat.models import (
    USER_SPEAKER,
    Message,
    MessageKind,
    MessageStatus,
    ReadMark,
    Session,
    Thread,
)
from apps.chat.records.attachments import MAX_PER_MESSAGE, attachment_add, attachments_send
from apps.chat.records.naming import branch_name
from apps.chat.records.sessions import session_create
from apps.chat.records.text import storable
from apps.providers.models import Credential
from apps.roles.models import Role

MAX_IMPORTED_MESSAGES = 100_000  # per thread


@dataclass
class ImportedMessage:
    speaker: str  # USER_SPEAKER or a role's handle
    text: str
    created_at: datetime | None = None
    model: str = ""
    files: list[tuple[str, bytes]] = field(default_factory=list)  # (name, bytes), the person's
    interrupted: bool = False  # a reply stopped before its end (shown as stopped)


@dataclass
class ImportedThread:
    messages: list[ImportedMessage]
    parent: int | None = None  # the index of the thread it branches from (written before it)
    fork_at: int | None = None  # the index of the last shared message in the parent's own


@dataclass
class ImportedSession:
    session: Session
    threads: list[Thread]
    messages: int
    problems: list[str]  # attachments refused, with why


def session_import(
    *,
    owner,
    name: str,
    roles: list[Role] | None,
    threads: list[ImportedThread],
    created_at: datetime | None = None,
    updated_at: datetime | None = None,
    credential: Credential | None = None,
    model: str = "",
) -> ImportedSession:
    """A new session of `owner`'s holding the threads as written; read by its owner up to its
    last message (nothing imported shows as unread). Without a credential it takes the one
    (and the model) of the owner's latest session that has one, so going on with an imported
    chat is answered by the model they use, not by the demo."""
    if not threads or threads[0].parent is not None:
        raise ValueError("The first imported thread is the main one: it has no parent.")
    if credential is None:
        latest = (
            Session.objects.filter(owner=owner, credential__isnull=False)
            .select_related("credential")
            .order_by("-updated_at")
            .first()
        )
        if latest is not None:
            credential, model = latest.credential, model or latest.model
    problems: list[str] = []
    with transaction.atomic():
        session = session_create(
            owner=owner, name=name, roles=roles, credential=credential, model=model, greet=False
        )
        main = session.active_thread
        assert main is not None
        main.label = session.name
        main.save(update_fields=["label"])
        made: list[Thread] = []
        rows: list[list[Message]] = []
        taken = {main.label}
        for plan in threads:
            if plan.parent is None:
                thread = main
            else:
                parent = made[plan.parent]
                fork = rows[plan.parent][plan.fork_at] if plan.fork_at is not None else None
                label = branch_name(parent.label, taken)
                taken.add(label)
                thread = Thread.objects.create(
                    session=session, parent=parent, forked_from=fork, label=label,
                    sticky_handle=main.sticky_handle,
                    persona_version_id=main.persona_version_id,
                    memory_version_id=main.memory_version_id,
                )  # fmt: skip
            made.append(thread)
            rows.append(_write_messages(thread, plan.messages, owner, session, problems))
        count = sum(len(r) for r in rows)
        _date(session, made, rows, created_at, updated_at)
        ReadMark.objects.bulk_create(
            ReadMark(thread=thread, user_id=owner.pk, seen_seq=len(own))
            for thread, own in zip(made, rows, strict=True)
        )
    return ImportedSession(session, made, count, problems)


def _write_messages(
    thread: Thread, messages: list[ImportedMessage], owner, session: Session, problems: list[str]
) -> list[Message]:
    messages = messages[:MAX_IMPORTED_MESSAGES]
    rows = Message.objects.bulk_create(
        (
            Message(
                thread=thread,
                seq=seq,
                speaker=m.speaker,
                author=owner if m.speaker == USER_SPEAKER else None,
                kind=MessageKind.CHAT,
                status=MessageStatus.INTERRUPTED if m.interrupted else MessageStatus.DONE,
                content=[{"type": "text", "text": storable(m.text)}] if m.text else [],
                model=m.model[:120],
            )
            for seq, m in enumerate(messages, start=1)
        ),
        batch_size=500,
    )
    dated = []
    for row, message in zip(rows, messages, strict=True):
        if message.created_at is not None:
            row.created_at = row.finished_at = message.created_at
            dated.append(row)
    Message.objects.bulk_update(dated, ["created_at", "finished_at"], batch_size=500)
    Thread.objects.filter(pk=thread.pk).update(next_seq=len(rows) + 1)
    for row, message in zip(rows, messages, strict=True):
        kept = []
        for file_name, data in message.files[:MAX_PER_MESSAGE]:
            try:
                kept.append(
                    attachment_add(
                        session=session, owner=owner, thread=thread, name=file_name, data=data
                    )
                )
            except ValidationError as exc:
                problems.append(" ".join(exc.messages))
        if kept:
            attachments_send(message=row, attachments=kept)
    return rows


def _date(
    session: Session,
    threads: list[Thread],
    rows: list[list[Message]],
    created_at: datetime | None,
    updated_at: datetime | None,
) -> None:
    """The session and its threads keep the source's times, so the list sorts them as they were."""
    times = [m.created_at for own in rows for m in own]
    began = created_at or (min(times) if times else None)
    ended = updated_at or (max(times) if times else None) or began
    if began is None:
        return
    Session.objects.filter(pk=session.pk).update(created_at=began, updated_at=ended)
    for thread, own in zip(threads, rows, strict=True):
        first = own[0].created_at if own else began
        last = own[-1].created_at if own else first
        Thread.objects.filter(pk=thread.pk).update(created_at=first, updated_at=last)
