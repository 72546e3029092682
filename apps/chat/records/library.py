"""A session's library as the room uses it: adding a document (under the one quota the
session's files share) and taking one out. The library app reads and searches; this module
holds what depends on the session: its quota, its lock, and the worker that reads."""

from __future__ import annotations

from functools import partial

from celery import current_app
from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.files.base import ContentFile
from django.core.files.storage import default_storage
from django.db import transaction

from apps.chat.models import Attachment, AttachmentKind, Session
from apps.chat.records.attachments import whispered_save_warning
from apps.chat.records.sessions import session_storage_used
from apps.chat.records.text import clean_name
from apps.library.models import Document, DocumentState
from apps.library.selectors import stored_name
from apps.library.services import AlreadyThere, document_create
from apps.library.tasks import INDEX_TASK

MAX_DOCUMENT_BYTES = 100 * 1024 * 1024


def library_add(*, session: Session, by, name: str, data: bytes) -> Document:
    """A document in the session's library, read by a worker in the background; refused in
    a sentence when it is empty, too big, there already, or over the session's quota (the
    session's row is locked for the arithmetic, as for attachments and workspace files)."""
    name = clean_name(name.replace("\\", "/").rsplit("/", 1)[-1], what="file name", limit=200)
    if not data:
        raise ValidationError(f"“{name}” is empty.")
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ValidationError(f"“{name}” is over {MAX_DOCUMENT_BYTES // 1_048_576} MB.")
    with transaction.atomic():
        Session.objects.select_for_update().filter(pk=session.pk).first()
        used = session_storage_used(session)
        quota = settings.PARLEY_WORKSPACE_QUOTA_MB * 1024 * 1024
        if used + len(data) > quota:
            raise ValidationError(
                f"“{name}” does not fit in this session's {quota // 1_048_576} MB of files: "
                f"{used / 1_048_576:.1f} MB are used. Delete documents, files or attachments "
                "you no longer need."
            )
        try:
            document = document_create(session=session, by=by, name=name, data=data)
        except AlreadyThere as exc:
            raise ValidationError(str(exc)) from None
        if not default_storage.exists(stored_name(document)):
            default_storage.save(stored_name(document), ContentFile(data))
        transaction.on_commit(partial(_read_later, document.pk))
    return document


def library_from_attachment(*, attachment: Attachment, by, for_everyone: bool = False) -> Document:
    """A sent message's PDF or text file, added to its session's library. The library is the
    whole room's: a whispered file goes in only `for_everyone`, as its person chose; otherwise
    a ValidationError (code "whispered") says who would see it."""
    if attachment.message_id is None:
        raise ValidationError("Send the message first: then its files can go in the library.")
    if attachment.kind not in (AttachmentKind.PDF, AttachmentKind.TEXT):
        raise ValidationError(f"“{attachment.name}” is a picture: the library reads documents.")
    whisper = attachment.message
    if whisper is not None and whisper.private and not for_everyone:
        warning = whispered_save_warning(
            whisper, place="The session's library is", ask="Add it for everyone?"
        )
        raise ValidationError(warning, code="whispered")
    with attachment.file.open("rb") as handle:
        data = handle.read()
    return library_add(session=attachment.session, by=by, name=attachment.name, data=data)


def library_reread(*, document: Document) -> None:
    """Read the document again (after a failure, or with a newer reader)."""
    Document.objects.filter(pk=document.pk).update(state=DocumentState.QUEUED, error="")
    transaction.on_commit(partial(_read_later, document.pk))


def library_remove(*, document: Document) -> None:
    """Take a document out: its chunks (and so its index entries) and its stored bytes."""
    name = stored_name(document)
    document.delete()
    transaction.on_commit(partial(default_storage.delete, name))


def _read_later(document_id: int) -> None:
    current_app.send_task(INDEX_TASK, args=[document_id])
