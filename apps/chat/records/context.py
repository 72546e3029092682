"""Writes for named, versioned persona and memory (see models/context.py).

Every change is a new version. A thread keeps the versions it pinned until it takes the latest:
when the person asks ("Use the latest"), saves the settings from it, or restores a version
from it, or a role in it writes the memory. A thread with no messages yet (and no parent's
history) has nothing to keep consistent with, so it follows every change.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef

from apps.chat.models import ContextKind, ContextVersion, Message, Session, Thread
from apps.chat.records.text import storable

PIN: dict[str, str] = {
    ContextKind.PERSONA: "persona_version",
    ContextKind.MEMORY: "memory_version",
}


def context_save(
    *,
    session: Session,
    kind: str,
    text: str,
    name: str | None = None,
    author=None,
    role: str = "",
    note: str = "",
    thread: Thread | None = None,
) -> ContextVersion | None:
    """Store a new version of the session's persona or memory when its text or name changed
    (None when nothing did); `thread` (where it was changed) takes it, as do empty threads."""
    if kind not in PIN:
        raise ValidationError(f"Unknown kind {kind!r}: persona or memory.")
    text = storable(text)
    with transaction.atomic():
        locked = Session.objects.select_for_update().get(pk=session.pk)
        name = (
            " ".join(storable(name).split())[:80]
            if name is not None
            else getattr(locked, f"{kind}_name")
        )
        latest = latest_version(session_id=session.pk, kind=kind)
        if latest is not None and latest.text == text and latest.name == name:
            return None
        version = ContextVersion.objects.create(
            session_id=session.pk, kind=kind, number=(latest.number if latest else 0) + 1,
            name=name, text=text, author=author, author_role=role, note=note[:120],
        )  # fmt: skip
        setattr(session, kind, text)
        setattr(session, f"{kind}_name", name)
        session.save(update_fields=[kind, f"{kind}_name", "updated_at"])
        empty = Thread.objects.filter(session_id=session.pk, parent=None).exclude(
            Exists(Message.objects.filter(thread=OuterRef("pk")))
        )  # a branch goes on from its parent's history
        empty.update(**{PIN[kind]: version})
        if thread is not None:
            Thread.objects.filter(pk=thread.pk).update(**{PIN[kind]: version})
            setattr(thread, PIN[kind], version)
    return version


def latest_version(*, session_id: int, kind: str) -> ContextVersion | None:
    return (
        ContextVersion.objects.filter(session_id=session_id, kind=kind).order_by("-number").first()
    )


def thread_snapshot(*, thread: Thread) -> Thread:
    """Pin a thread to the session's latest persona and memory: a new chat's snapshot, and
    "Use the latest" for an older thread (a branch keeps its parent's instead)."""
    pins = {
        field: latest_version(session_id=thread.session_id, kind=kind)
        for kind, field in PIN.items()
    }
    Thread.objects.filter(pk=thread.pk).update(**pins)
    for field, version in pins.items():
        setattr(thread, field, version)
    return thread


def thread_context(*, thread: Thread, session: Session) -> tuple[str, str]:
    """The persona and memory the thread's roles are told: its pinned versions (a thread
    from before pins follows the session's latest)."""
    ids = [pk for pk in (thread.persona_version_id, thread.memory_version_id) if pk]
    texts = dict(ContextVersion.objects.filter(pk__in=ids).values_list("pk", "text")) if ids else {}
    persona = texts.get(thread.persona_version_id or 0, session.persona)
    memory = texts.get(thread.memory_version_id or 0, session.memory)
    return persona, memory


def stale_context(*, thread: Thread, session: Session) -> list[ContextVersion]:
    """The pinned versions the session has changed since (the thread offers the latest)."""
    stale = []
    for kind, field in PIN.items():
        version = getattr(thread, field)
        latest = (getattr(session, kind), getattr(session, f"{kind}_name"))
        if version is not None and (version.text, version.name) != latest:
            stale.append(version)
    return stale


def context_restore(
    *, session: Session, kind: str, number: int, author, thread: Thread | None = None
) -> ContextVersion:
    """Make an earlier version the latest again (as a new version: history is never rewritten)."""
    try:
        old = ContextVersion.objects.get(session=session, kind=kind, number=number)
    except ContextVersion.DoesNotExist:
        raise ValidationError(f"This session has no {kind} version {number}.") from None
    version = context_save(
        session=session, kind=kind, text=old.text, name=old.name, author=author,
        note=f"restored v{number}", thread=thread,
    )  # fmt: skip
    if version is None:
        raise ValidationError(f"Version {number} is already the latest {kind}.")
    return version
