"""A session's library through the API (what `parley library add FILE…` uses): its documents
with their state, adding documents, removing one. Reads for anyone in the room; changes for
its members and owner, with a post token."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from django.core.exceptions import ValidationError
from ninja import File, Router, Schema, Status
from ninja.files import UploadedFile

from apps.api.auth import require_post_scope
from apps.api.schemas import ERRORS, Error, Refused
from apps.chat.access import Need, reach
from apps.chat.records.library import library_add, library_remove
from apps.chat.selectors import sessions_for_user
from apps.library.models import Document

router = Router()
MAX_DOCUMENTS_AT_ONCE = 100


class DocumentOut(Schema):
    id: UUID
    name: str
    size: int
    state: str  # queued, indexing, ready or failed
    error: str
    pages: int | None
    passages: int
    created_at: datetime


def document_out(document: Document) -> DocumentOut:
    return DocumentOut(
        id=document.public_id, name=document.name, size=document.size, state=document.state,
        error=document.error, pages=document.pages, passages=document.chunks_count,
        created_at=document.created_at,
    )  # fmt: skip


def _session(request, session_id: UUID, need: Need):
    return reach(sessions_for_user, user=request.user, need=need, public_id=session_id)


@router.get(
    "/sessions/{session_id}/library",
    response={200: list[DocumentOut], **ERRORS},
    summary="A session's library",
)
def list_documents(request, session_id: UUID):
    """Its documents, each with its state: `queued` and `indexing` while a worker reads it,
    then `ready` (with its pages and passages) or `failed` (with the reason in `error`)."""
    session = _session(request, session_id, Need.READ)
    return [document_out(d) for d in Document.objects.filter(session=session)]


@router.post(
    "/sessions/{session_id}/library",
    response={201: list[DocumentOut], **ERRORS, 422: Error},
    summary="Add documents to a session's library",
)
def add_documents(
    request,
    session_id: UUID,
    files: list[UploadedFile] = File(..., min_length=1, max_length=MAX_DOCUMENTS_AT_ONCE),  # noqa: B008
):
    """PDFs (with a text layer), Word documents, Markdown, text, HTML, CSV and source files
    as multipart `files`; each is read in the background (poll the library for its state). A
    file the library refuses (empty, too big, there already, over the session's quota) is
    said in `detail`; the ones before it are kept."""
    require_post_scope(request)
    session = _session(request, session_id, Need.TALK)
    added = []
    for upload in files:
        try:
            name, data = upload.name or "document", upload.read()
            added.append(library_add(session=session, by=request.user, name=name, data=data))
        except ValidationError as exc:
            kept = f" ({len(added)} added before it)" if added else ""
            raise Refused(422, " ".join(exc.messages) + kept, "files") from None
    return Status(201, [document_out(document) for document in added])


@router.delete(
    "/sessions/{session_id}/library/{document_id}",
    response={204: None, **ERRORS},
    summary="Remove a document from a session's library",
)
def remove_document(request, session_id: UUID, document_id: UUID):
    require_post_scope(request)
    session = _session(request, session_id, Need.TALK)
    document = Document.objects.filter(session=session, public_id=document_id).first()
    if document is None:
        raise Refused(404, "No such document in this library.", "document_id")
    library_remove(document=document)
    return Status(204, None)
