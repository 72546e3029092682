"""Writing attachments: an upload sniffed, re-encoded and stored (once per session and hash),
counted in the session's quota with its workspace, and bound to the message it is sent with."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from apps.attachments.bounded import pdf_first_page
from apps.attachments.sniff import Refused, Sniffed, sniff
from apps.chat.models import (
    Attachment,
    Membership,
    Message,
    QueuedMessage,
    Session,
    Thread,
    person_name,
)
from apps.chat.models.attachments import stored_name
from apps.chat.records.sessions import (
    session_files_write,
    session_storage_used,
    session_workspace,
)
from apps.chat.records.text import clean_name, storable
from apps.workspace.files import WorkspaceError

MAX_ATTACHMENT_BYTES = 32 * 1024 * 1024  # a PDF as big as Anthropic's whole request may be
MAX_PER_MESSAGE = 20  # Anthropic shrinks every image of a request that holds more
MAX_FILES_AT_ONCE = 20  # in one upload

# The files stored inside the transaction files_kept_on_commit guards (None outside one).
_stored_here: ContextVar[list[str] | None] = ContextVar("stored_here", default=None)


@contextmanager
def files_kept_on_commit() -> Iterator[None]:
    """Around a transaction that adds attachments: when it fails, the bytes it stored go too
    (a database rollback cannot take back a file), so rows and files are kept together or
    not at all."""
    stored: list[str] = []
    token = _stored_here.set(stored)
    try:
        yield
    except BaseException:
        for name in stored:
            default_storage.delete(name)
        raise
    finally:
        _stored_here.reset(token)


def _store(name: str, data: bytes) -> None:
    if default_storage.exists(name):
        return  # the same bytes, kept for the session before
    saved = default_storage.save(name, ContentFile(data))
    stored = _stored_here.get()
    if stored is not None:
        stored.append(saved)


def attachment_add(*, session: Session, owner, thread: Thread | None, name: str, data: bytes):
    """A new attachment of `owner`'s, waiting in their composer until it is sent; a
    ValidationError in a sentence when the file is refused or the quota is full."""
    name = _clean_name(name)
    if len(data) > MAX_ATTACHMENT_BYTES:
        raise ValidationError(
            f"“{name}” is {len(data) / 1_048_576:.1f} MB; attachments are at most "
            f"{MAX_ATTACHMENT_BYTES // 1_048_576} MB."
        )
    try:
        kept = sniff(data, name)
    except Refused as exc:
        raise ValidationError(str(exc)) from None
    digest = hashlib.sha256(kept.data).hexdigest()
    path = stored_name(session, digest, kept.media_type)
    with transaction.atomic():
        # The session's row locks the quota's arithmetic against a concurrent upload (of an
        # attachment or a workspace file: session_files_write takes it too).
        Session.objects.select_for_update().filter(pk=session.pk).first()
        twin = Attachment.objects.filter(session=session, sha256=digest).first()
        preview, preview_size = (twin.preview.name, twin.preview_size) if twin else ("", 0)
        if twin is None:
            picture = _first_page(kept)
            _check_quota(session, len(kept.data) + len(picture or b""), name)
            _store(path, kept.data)
            if picture is not None:
                preview, preview_size = path.rsplit(".", 1)[0] + ".page1.png", len(picture)
                _store(preview, picture)
        return Attachment.objects.create(
            session=session, owner=owner, thread=thread, name=name, kind=kept.kind,
            media_type=kept.media_type, size=len(kept.data), sha256=digest, file=path,
            width=kept.width, height=kept.height, pages=kept.pages,
            # What was worked out for the same bytes before is not worked out again.
            stand_in=twin.stand_in if twin else "", described_by=twin.described_by if twin else "",
            preview=preview, preview_size=preview_size,
        )  # fmt: skip


def _first_page(kept: Sniffed) -> bytes | None:
    """A PDF's first page as a PNG (None for other files, or when it does not render)."""
    return pdf_first_page(kept.data) if kept.kind == "pdf" else None


def _check_quota(session: Session, adding: int, name: str) -> None:
    used = session_storage_used(session)
    quota = settings.PARLEY_WORKSPACE_QUOTA_MB * 1024 * 1024
    if used + adding > quota:
        raise ValidationError(
            f"“{name}” does not fit in this session's {quota // 1_048_576} MB of files: "
            f"{used / 1_048_576:.1f} MB are used. Delete files or attachments you no longer need."
        )


def _clean_name(name: str) -> str:
    """A name to show and to offer on download: the last part of a path, on one line."""
    base = storable(name or "").replace("\\", "/").rsplit("/", 1)[-1]
    try:
        return clean_name(base, what="file name", limit=200)
    except ValidationError:
        return "attachment"


def attachments_send(*, message: Message, attachments: list[Attachment]) -> None:
    """Bind attachments (waiting in a composer, or in the queue with their message) to the
    message they are sent with, in their order."""
    _bind(attachments, message=message, queued=None)


def attachments_queue(*, queued: QueuedMessage, attachments: list[Attachment]) -> None:
    """Keep waiting attachments with a message that waits in the thread's queue."""
    _bind(attachments, queued=queued)


def _bind(attachments: list[Attachment], **fields) -> None:
    if len(attachments) > MAX_PER_MESSAGE:
        raise ValidationError(f"A message takes at most {MAX_PER_MESSAGE} attachments.")
    for position, attachment in enumerate(attachments):
        Attachment.objects.filter(pk=attachment.pk, message__isnull=True).update(
            position=position, **fields
        )


def attachment_discard(*, attachment: Attachment) -> None:
    """Take a waiting attachment out of its composer; its bytes go when nothing uses them."""
    if attachment.message_id is not None or attachment.queued_id is not None:
        raise ValidationError("A sent attachment stays with its message.")
    attachments_forget(Attachment.objects.filter(pk=attachment.pk))


def attachments_forget(attachments) -> None:
    """Delete these attachments (their messages are going); the stored bytes, and a PDF's
    first page, go when no attachment of the session uses them any more."""
    stored = set(attachments.values_list("session_id", "sha256", "file", "preview"))
    attachments.delete()
    for session_id, digest, path, preview in stored:
        if not Attachment.objects.filter(session_id=session_id, sha256=digest).exists():
            for name in filter(None, (path, preview)):
                default_storage.delete(name)


def whispered_save_warning(
    whisper: Message, *, place: str = "The session's files are", ask: str = "Save it for everyone?"
) -> str:
    """Who sees a whispered file now, and who would once it is in the session's files (or
    its library: `place`)."""
    audience = [person_name(user) for user in whisper.audience.all()]
    audience += [f"@{handle}" for handle in whisper.audience_roles]
    room = Membership.objects.filter(session_id=whisper.thread.session_id).count() + 1
    people = f"{room} {'person' if room == 1 else 'people'}"
    return (
        f"This file was whispered: only {', '.join(audience) or 'its audience'} can see it. "
        f"{place} open to everyone in the room ({people}) and to every role. {ask}"
    )


def attachment_from_workspace(*, session: Session, owner, thread: Thread, path: str) -> Attachment:
    """A file of the session's workspace, attached to the message being written (a copy:
    the file stays, and may change later without changing what was sent)."""
    workspace = session_workspace(session)
    name = path.replace("\\", "/").rpartition("/")[2]
    try:
        if workspace.size(path) > MAX_ATTACHMENT_BYTES:  # (no such file: a WorkspaceError)
            raise ValidationError(
                f"“{name}” is over {MAX_ATTACHMENT_BYTES // 1_048_576} MB, the most an "
                "attachment may be."
            )
        with workspace.open(path) as handle:
            data = handle.read(MAX_ATTACHMENT_BYTES + 1)
    except WorkspaceError as exc:
        raise ValidationError(str(exc)) from None
    return attachment_add(session=session, owner=owner, thread=thread, name=name, data=data)


def attachment_to_workspace(*, attachment: Attachment, for_everyone: bool = False) -> str:
    """Save a copy of an attachment into its session's files, under `attachments/` (a name
    already taken gets a number); the path it was saved as. The files are open to the whole
    room and every role: a whispered attachment is saved there only `for_everyone`, as its
    person chose; otherwise a ValidationError (code "whispered") says who would see it."""
    whisper = attachment.message if attachment.message_id else None
    if whisper is not None and whisper.private and not for_everyone:
        raise ValidationError(whispered_save_warning(whisper), code="whispered")
    workspace = session_workspace(attachment.session)
    stem, dot, suffix = attachment.name.rpartition(".")
    stem, suffix = (stem, dot + suffix) if stem else (suffix, "")
    taken = {info.path for info in workspace.files()}
    path, number = f"attachments/{attachment.name}", 2
    while path in taken:
        path, number = f"attachments/{stem} ({number}){suffix}", number + 1
    with attachment.file.open("rb") as handle:
        data = handle.read()
    try:
        session_files_write(session=attachment.session, path=path, data=data)
    except WorkspaceError as exc:
        raise ValidationError(str(exc)) from None
    return path
